package gateway

import "errors"

var (
	// ErrQueueFull means a session's lane already holds its cap of messages.
	ErrQueueFull = errors.New("queue full")
	// ErrClosed means the gateway is shutting down and takes no more messages.
	ErrClosed = errors.New("gateway is shutting down")
)
