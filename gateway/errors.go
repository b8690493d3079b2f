package gateway

import "errors"

var (
	// ErrQueueFull means a session's lane already holds its cap of messages.
	ErrQueueFull = errors.New("queue full")
	// ErrClosed means the gateway is shutting down and takes no more messages.
	ErrClosed = errors.New("gateway is shutting down")
	// ErrTooManyPairings means an adapter has MaxPendingPairings requests
	// waiting already.
	ErrTooManyPairings = errors.New("too many pairing requests waiting")
	// ErrPairingNotFound means no waiting pairing request has the code.
	ErrPairingNotFound = errors.New("pairing code not found")
	// ErrPairingExpired means the pairing code is past its hour.
	ErrPairingExpired = errors.New("pairing code expired")
)
