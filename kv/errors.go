package kv

import "errors"

var (
	// ErrNotFound means the session has no value under that key.
	ErrNotFound = errors.New("no such key")
	// ErrInvalidKey means a key is empty, too long or holds characters a
	// key can't (control characters, invalid UTF-8).
	ErrInvalidKey = errors.New("invalid key")
	// ErrValueTooLarge means a value is over the per-value limit.
	ErrValueTooLarge = errors.New("value too large")
	// ErrInvalidValue means a value is not text both engines store (not
	// UTF-8, or holding a NUL).
	ErrInvalidValue = errors.New("invalid value")
	// ErrSessionFull means storing a value would take the session over its
	// limit of bytes or keys.
	ErrSessionFull = errors.New("session storage full")
	// ErrNoSession means the session the storage belongs to does not exist.
	ErrNoSession = errors.New("session not found")
	// ErrBadCursor means a listing cursor was not one List returned.
	ErrBadCursor = errors.New("invalid cursor: pass the next_cursor of the previous page unchanged, or none for the first page")
)
