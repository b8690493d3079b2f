package discord

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gorilla/websocket"

	"github.com/parleyd/parley/secret"
)

// ErrUnauthorized means the gateway refused the bot token (close code
// 4004). The token itself is never part of an error.
var ErrUnauthorized = errors.New("Discord refused the bot token (gateway close 4004 Authentication failed): check the adapter's token; the developer portal (your application → Bot → Reset Token) makes a new one")

// ErrRefused means the gateway closed for good for a reason other than
// the token: intents, shards or the API version.
var ErrRefused = errors.New("Discord refused the gateway connection")

// fatal says whether an error from opening the gateway is one retrying
// can't mend, and if so returns the error to stop with. Discord's close
// codes 4004 and 4010-4014 mean "do not reconnect".
func fatal(err error) error {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return nil
	}
	switch ce.Code {
	case 4004:
		return ErrUnauthorized
	case 4010:
		return fmt.Errorf("%w: invalid shard (close 4010); check shard_id and shard_count", ErrRefused)
	case 4011:
		return fmt.Errorf("%w: sharding required (close 4011); the bot is in too many guilds for one connection, so set shard_count (and run one adapter per shard_id)", ErrRefused)
	case 4012:
		return fmt.Errorf("%w: invalid API version (close 4012)", ErrRefused)
	case 4013:
		return fmt.Errorf("%w: invalid intents (close 4013)", ErrRefused)
	case 4014:
		return fmt.Errorf("%w: disallowed intents (close 4014); turn on the Message Content Intent in the developer portal (your application → Bot → Privileged Gateway Intents)", ErrRefused)
	}
	return nil
}

// sessionGone says whether the gateway closed because the session can't
// be resumed (4007 invalid seq, 4009 session timed out): a new one must be
// identified.
func sessionGone(err error) bool {
	var ce *websocket.CloseError
	return errors.As(err, &ce) && (ce.Code == 4007 || ce.Code == 4009)
}

// redact returns err with the token taken out of its text, in case a
// library put it there. The result does not unwrap to err.
func redact(err error, token secret.String) error {
	if err == nil {
		return nil
	}
	return errors.New(redactString(err.Error(), token.Reveal()))
}

func redactString(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "[redacted]")
}
