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
)
