package sessions_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// The last turns of the live context, with its summary, read alone.
func TestMessagesLastTurns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		store := sessions.NewStore(open(t))
		s, _, err := store.Resolve(ctx, sessions.ChatKey("telegram", "1", "1", "a"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		contents := func(msgs []sessions.Message) string {
			var out []string
			for _, m := range msgs {
				out = append(out, m.Content)
			}
			return strings.Join(out, ",")
		}
		got, err := store.Messages(ctx, s.ID, sessions.MessagesOptions{Turns: 3})
		if err != nil || len(got) != 0 {
			t.Fatalf("an empty session: %v %v", got, err)
		}
		if _, err := store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleSystem, Content: "S", Summary: true}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 5; i++ {
			for _, m := range []sessions.Message{
				{Role: sessions.RoleUser, Content: fmt.Sprint("u", i)},
				{Role: sessions.RoleAssistant, Content: fmt.Sprint("a", i)},
			} {
				if _, err := store.Append(ctx, s.ID, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, tc := range []struct {
			turns int
			want  string
		}{
			{1, "S,u5,a5"},
			{2, "S,u4,a4,u5,a5"},
			{5, "S,u1,a1,u2,a2,u3,a3,u4,a4,u5,a5"},
			{9, "S,u1,a1,u2,a2,u3,a3,u4,a4,u5,a5"},
		} {
			got, err := store.Messages(ctx, s.ID, sessions.MessagesOptions{Turns: tc.turns})
			if err != nil || contents(got) != tc.want {
				t.Fatalf("last %d turns: %q %v, want %q", tc.turns, contents(got), err, tc.want)
			}
		}
		if _, err := store.Messages(ctx, "01a20000-0000-7000-8000-000000000000", sessions.MessagesOptions{Turns: 2}); err == nil {
			t.Fatal("a missing session read fine")
		}
	})
}
