package sessions

import "github.com/parleyd/parley/events"

// Lifecycle events, published on the bus after the change commits.
const (
	EventSessionCreated  events.Type = "session.created"  // Data: SessionCreated
	EventSessionReset    events.Type = "session.reset"    // Data: SessionReset
	EventSessionDeleted  events.Type = "session.deleted"  // Data: SessionDeleted
	EventMessageAppended events.Type = "message.appended" // Data: MessageAppended
)

// SessionCreated is the data of a session.created event.
type SessionCreated struct{ Session Session }

// SessionReset is the data of a session.reset event: Old was archived and
// New took its place.
type SessionReset struct {
	Old, New Session
	Reason   string
}

// SessionDeleted is the data of a session.deleted event.
type SessionDeleted struct {
	ID  ID
	Key Key
}

// MessageAppended is the data of a message.appended event.
type MessageAppended struct{ Message Message }
