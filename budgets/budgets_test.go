package budgets

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// A reply's usage counts against its user, session and agent; once a cap
// is reached the next turn is refused in plain words and counted, and a
// session of another user is not.
func TestCapsCountAndRefuse(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		caps := config.Budgets{UserDailyTokens: 100}
		var refused []string
		c := New(db, func() config.Budgets { return caps }, func(scope string) { refused = append(refused, scope) })
		store := sessions.NewStore(db, sessions.WithAppendHook(c.Record))
		mine, _, err := store.Resolve(ctx, sessions.ChatKey("telegram", "1", "1", "a"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		theirs, _, err := store.Resolve(ctx, sessions.ChatKey("telegram", "2", "2", "a"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Admit(ctx, mine); err != nil {
			t.Fatalf("a turn under the cap: %v", err)
		}
		if _, err := store.Append(ctx, mine.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "x",
			Usage: &sessions.Usage{Input: 80, Output: 30}}); err != nil {
			t.Fatal(err)
		}
		b, err := c.Budget(ctx, mine.Key, mine.ID)
		if err != nil || len(b.Limits) != 1 || b.Limits[0].Used != 110 || !b.Limits[0].Reached || !strings.Contains(b.Line(), "user 0 of 100 tokens left") {
			t.Fatalf("the budget after 110 tokens: %+v %v (%q)", b, err, b.Line())
		}
		var re *agent.RefusedError
		if err := c.Admit(ctx, mine); !errors.As(err, &re) || !strings.Contains(re.Text, "usage limit") || len(refused) != 1 || refused[0] != "user" {
			t.Fatalf("a turn past the cap: %v, refusals %v", err, refused)
		}
		if err := c.Admit(ctx, theirs); err != nil {
			t.Fatalf("another user's turn: %v", err)
		}
		caps = config.Budgets{}
		if err := c.Admit(ctx, mine); err != nil {
			t.Fatalf("with the cap removed: %v", err)
		}
	})
}
