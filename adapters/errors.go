package adapters

import "errors"

var (
	// ErrUnsupported means the adapter can't do what was asked.
	ErrUnsupported = errors.New("not supported by this adapter")
	// ErrInvalidInbound means an adapter built an Inbound the gateway can't take.
	ErrInvalidInbound = errors.New("invalid inbound message")
	// ErrUnknownType means no adapter registered under that type name.
	ErrUnknownType = errors.New("unknown adapter type")
	// ErrNoCredentials is what a factory returns when its credentials (a
	// token, say) are empty: the daemon skips that adapter and says so, so
	// one config runs with only the channels that have credentials.
	ErrNoCredentials = errors.New("no credentials configured")
	// ErrTooLarge means a file is over the size the caller takes.
	ErrTooLarge = errors.New("file too large")
	// ErrChannelLost is the cause of an adapter's stop (context.Cause)
	// when this process no longer runs the channel: another replica runs
	// it, or may at any moment. The adapter stops without a word more to
	// the platform (no last poll to confirm updates), which would cut off
	// the one that runs it now.
	ErrChannelLost = errors.New("another replica runs this channel now")
)
