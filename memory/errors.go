package memory

import "errors"

var (
	// ErrNotFound means no memory item with that id exists in the scope.
	ErrNotFound = errors.New("memory item not found")
	// ErrInvalid means a memory item can't be stored as given; the wrapped
	// message says which field and what to change.
	ErrInvalid = errors.New("invalid memory item")
	// ErrInvalidScope means a scope is missing its agent or user.
	ErrInvalidScope = errors.New("invalid memory scope")
	// ErrIndexUnavailable means the search index could not be reached or
	// answered with a server error; retrying later may work.
	ErrIndexUnavailable = errors.New("memory index unavailable")
)
