package permissions

import (
	"context"
	"testing"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// newSession makes a session to hang session rules on.
func newSession(t testing.TB, db *dbutil.DB, chat string) string {
	t.Helper()
	s, err := sessions.NewStore(db).Create(context.Background(), sessions.ChatKey("telegram", chat, chat, "a"), sessions.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(s.ID)
}

// Answers that last are stored per session and per agent and user, read
// back in one query, listed, revoked, and gone with their session.
func TestStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		st := NewStore(db)
		s1, s2 := newSession(t, db, "1"), newSession(t, db, "2")

		if err := st.GrantSession(ctx, s1, "github__list_issues", "telegram:1"); err != nil {
			t.Fatal(err)
		}
		// Granting again is no error.
		if err := st.GrantSession(ctx, s1, "github__list_issues", "telegram:1"); err != nil {
			t.Fatal(err)
		}
		if err := st.GrantProject(ctx, "a", "telegram:1", "github__search"); err != nil {
			t.Fatal(err)
		}
		if err := st.GrantProject(ctx, "a", "telegram:1", "github__search"); err != nil {
			t.Fatal(err)
		}
		if err := st.GrantProject(ctx, "b", "telegram:1", "fs__*"); err != nil {
			t.Fatal(err)
		}

		got, err := st.Grants(ctx, s1, "a", "telegram:1", "")
		if err != nil {
			t.Fatal(err)
		}
		if got.Session.Len() != 1 || got.Project.Len() != 1 {
			t.Fatalf("session 1: %d session and %d project rules, want 1 and 1", got.Session.Len(), got.Project.Len())
		}
		if v := Evaluate("github__list_issues", Layers{Session: got.Session}, true); v.Decision != Allow || v.Layer != LayerSession {
			t.Fatalf("the session grant reads back as %+v", v)
		}
		// Another session, another user: nothing of theirs.
		if got, err := st.Grants(ctx, s2, "a", "telegram:2", ""); err != nil || got.Session.Len()+got.Project.Len() != 0 {
			t.Fatalf("session 2, user 2: %+v, %v", got, err)
		}
		// The user's project rule follows them to another session.
		if got, err := st.Grants(ctx, s2, "a", "telegram:1", ""); err != nil || got.Session.Len() != 0 || got.Project.Len() != 1 {
			t.Fatalf("session 2, user 1: %+v, %v", got, err)
		}

		list, err := st.ProjectGrants(ctx, "", "telegram:1")
		if err != nil || len(list) != 2 || list[0].Agent != "a" || list[0].Tool != "github__search" || list[1].Tool != "fs__*" ||
			list[0].Decision != Allow || list[0].Created.IsZero() {
			t.Fatalf("ProjectGrants = %+v, %v", list, err)
		}
		if ok, err := st.RevokeProject(ctx, "a", "telegram:1", "github__search"); err != nil || !ok {
			t.Fatalf("revoke: %v %v", ok, err)
		}
		if ok, err := st.RevokeProject(ctx, "a", "telegram:1", "github__search"); err != nil || ok {
			t.Fatalf("revoke twice: %v %v", ok, err)
		}
		if list, _ := st.ProjectGrants(ctx, "a", ""); len(list) != 0 {
			t.Fatalf("after revoking: %+v", list)
		}

		// Deleting the session takes its rules along.
		if err := sessions.NewStore(db).Delete(ctx, sessions.ID(s1)); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Grants(ctx, s1, "x", "y", ""); err != nil || got.Session.Len() != 0 {
			t.Fatalf("a deleted session's rules: %+v, %v", got, err)
		}
	})
}
