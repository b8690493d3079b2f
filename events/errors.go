package events

import "errors"

// ErrClosed is returned by Next once the subscription is closed.
var ErrClosed = errors.New("events: subscription closed")
