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
