package gateway_test

import (
	"context"
	"errors"
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// The workspace a message's channel or binding sets (Options.Workspace),
// or the message itself names (the API's), is part of its session's key:
// the same chat in another workspace is another session.
func TestWorkspaceIsPartOfTheSessionKey(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		store := sessions.NewStore(db)
		r := newRig(t, db, echoRun, func(o *gateway.Options) {
			o.Sessions = store
			o.Workspace = func(in adapters.Inbound) string {
				if in.ChatID == "42" {
					return "team-a"
				}
				return ""
			}
		})
		r.deliver(msg("1", "hello"))
		other := msg("2", "hello")
		other.ChatID = "43"
		r.deliver(other)
		named := msg("3", "hello")
		named.Workspace = "team-b" // the message's own comes first
		r.deliver(named)
		r.sent(3)
		ctx := context.Background()
		for _, tc := range []struct {
			chat, workspace string
			want            bool
		}{
			{"42", "team-a", true}, {"42", "team-b", true}, {"42", "", false}, {"43", "", true}, {"43", "team-a", false},
		} {
			k := sessions.ChatKey("telegram", tc.chat, "7", "default")
			k.WorkspaceID = tc.workspace
			_, err := store.Active(ctx, k)
			if got := err == nil; got != tc.want || err != nil && !errors.Is(err, sessions.ErrNotFound) {
				t.Errorf("session of chat %s in workspace %q: %v, want one: %v", tc.chat, tc.workspace, err, tc.want)
			}
		}
	})
}
