package sessions

import (
	"context"

	"github.com/parleyd/parley/dbutil"
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
