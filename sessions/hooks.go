package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
)

// AppendHook runs inside the transaction that appends m, once m is stored
// (its id, seq and time set): what it writes commits with the message, or
// neither does, so a record that must follow a message (a reply's
// callback) survives any crash the message survives. Its error fails the
// append. It must be quick: the session's row is locked meanwhile.
type AppendHook func(ctx context.Context, q dbutil.Querier, m Message) error

// WithAppendHook runs hook in every Append's transaction.
func WithAppendHook(hook AppendHook) Option {
	return func(s *SQLStore) { s.appendHooks = append(s.appendHooks, hook) }
}

// DeleteHook runs inside the transaction that deletes the sessions ids
// (Delete, PruneArchived), before their rows go: it removes what another
// package keeps of their text (inbound payloads, outbox rows, run
// records, summaries), so that deleting a session deletes every copy.
// Its error fails the delete, which then changes nothing. in is "$1, $2,
// ..." for the ids and args their values, for an "IN (%s)" clause.
type DeleteHook func(ctx context.Context, q dbutil.Querier, in string, args []any) error

// WithDeleteHook runs hook in every delete's transaction.
func WithDeleteHook(hook DeleteHook) Option {
	return func(s *SQLStore) { s.deleteHooks = append(s.deleteHooks, hook) }
}

// runDeleteHooks runs the delete hooks for ids in q's transaction.
func (s *SQLStore) runDeleteHooks(ctx context.Context, q dbutil.Querier, ids []ID) error {
	if len(s.deleteHooks) == 0 {
		return nil
	}
	in, args := placeholders(ids)
	for _, hook := range s.deleteHooks {
		if err := hook(ctx, q, in, args); err != nil {
			return err
		}
	}
	return nil
}

// Lifecycle events beyond the bus's: an archived session, and a
// compaction. Lifecycle hooks see these and the bus's session events.
const (
	EventSessionArchived   events.Type = "session.archived"
	EventSessionUnarchived events.Type = "session.unarchived"
	EventSessionCompacted  events.Type = "session.compacted"
)

// Lifecycle is a change in a session's life as a LifecycleHook sees it,
// inside the transaction that makes it.
type Lifecycle struct {
	// Type is session.created, session.reset, session.archived,
	// session.unarchived, session.deleted or session.compacted.
	Type    events.Type
	Session ID
	Key     Key
	// Old is the session a reset archived (session.reset).
	Old ID
	// Reason is why a session was reset or archived.
	Reason string
	// Compacted is what a compaction summarized (session.compacted).
	Compacted *CompactedInfo
	At        time.Time
}

// CompactedInfo is what a session.compacted event tells of a compaction.
type CompactedInfo struct {
	Archived     int       `json:"archived"`
	Through      int64     `json:"through_seq"`
	SummaryID    MessageID `json:"summary_id"`
	TokensBefore int64     `json:"tokens_before"`
	TokensAfter  int64     `json:"tokens_after"`
}

// LifecycleHook runs inside the transaction that changes a session's life
// (creates, resets, archives, deletes or compacts it): what it writes
// commits with the change or not at all, so an outbox row it writes is
// there exactly when the change is, whatever crash follows. Its error
// fails the change. It must be quick.
type LifecycleHook func(ctx context.Context, q dbutil.Querier, l Lifecycle) error

// WithLifecycleHook runs hook in every lifecycle change's transaction.
func WithLifecycleHook(hook LifecycleHook) Option {
	return func(s *SQLStore) { s.lifecycleHooks = append(s.lifecycleHooks, hook) }
}

// lifecycle runs the lifecycle hooks in q's transaction.
func (s *SQLStore) lifecycle(ctx context.Context, q dbutil.Querier, l Lifecycle) error {
	for _, hook := range s.lifecycleHooks {
		if err := hook(ctx, q, l); err != nil {
			return fmt.Errorf("%s of session %s: %w", l.Type, l.Session, err)
		}
	}
	return nil
}

// BeforeAppendHook runs before a user message is appended, outside any
// transaction, and may add to its metadata (a host's snapshot_id): a
// message.user hook that waits for an answer. It must bound its own wait;
// its error is logged by the caller's hook, never failing the append.
type BeforeAppendHook func(ctx context.Context, id ID, m *Message)

// WithBeforeAppendHook runs hook before every user message's append.
func WithBeforeAppendHook(hook BeforeAppendHook) Option {
	return func(s *SQLStore) { s.beforeAppendHooks = append(s.beforeAppendHooks, hook) }
}
