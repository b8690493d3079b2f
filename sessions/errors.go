package sessions

import "errors"

var (
	// ErrNotFound means no session or message has that id.
	ErrNotFound = errors.New("not found")
	// ErrInvalidKey means a session key is missing a field.
	ErrInvalidKey = errors.New("invalid session key")
	// ErrBadCursor means a pagination cursor was not one List returned.
	ErrBadCursor = errors.New("invalid cursor: pass the next_cursor of the previous page unchanged, or none for the first page")
	// ErrBadLimit means a page size outside 1..MaxPageSize.
	ErrBadLimit = errors.New("page size out of range")
	// ErrInvalidMessage means a message can't be stored as given.
	ErrInvalidMessage = errors.New("invalid message")
	// ErrConflict means the change would give a key a second active session.
	ErrConflict = errors.New("another active session has that key")
	// ErrInvalidMetadata means session metadata is not a JSON object.
	ErrInvalidMetadata = errors.New("metadata must be a JSON object")
)
