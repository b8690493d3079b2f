package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// /model, /think, /undo, /retry and edits, in a chat, on both engines:
// settings land in the session's metadata, bad input changes nothing,
// undo and retry hide the last exchange (kept), and an edit of the latest
// message is answered again from its new text while an older one is noted.
func TestChatControls(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		store := sessions.NewStore(db)
		// The turn stores its message and reply, as the agent does.
		run := func(ctx context.Context, in gateway.TurnInput) (string, error) {
			reply, _ := echoRun(ctx, in)
			for i, m := range in.Messages {
				if _, err := store.Append(ctx, in.Session.ID, sessions.Message{ID: sessions.MessageID(in.IDs[i]), Role: sessions.RoleUser, Content: m.Text}); err != nil {
					return "", err
				}
			}
			_, err := store.Append(ctx, in.Session.ID, sessions.Message{Role: sessions.RoleAssistant, Content: reply})
			return reply, err
		}
		r := newRig(t, db, run, func(o *gateway.Options) {
			o.Sessions = store
			o.Agents[0].Models = []string{"openai/gpt-a", "openai/gpt-b"}
			o.Agents[0].Effort = "low"
		})
		n := 0
		say := func(in adapters.Inbound) string {
			t.Helper()
			r.deliver(in)
			n++
			return r.sent(n)[n-1]
		}
		key := gateway.SessionKey(msg("0", ""), "default")
		live := func() string {
			t.Helper()
			s, err := store.Active(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := store.Messages(context.Background(), s.ID, sessions.MessagesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, m := range msgs {
				out = append(out, m.Content)
			}
			return strings.Join(out, " | ")
		}
		meta := func() map[string]string {
			t.Helper()
			s, err := store.Active(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]string{}
			_ = json.Unmarshal(s.Metadata, &m)
			return m
		}

		if got := say(msg("1", "/undo")); got != "Nothing to undo yet." {
			t.Fatalf("/undo in a new chat: %q", got)
		}
		if got := say(msg("2", "/model")); !strings.Contains(got, "openai/gpt-a (in use)") {
			t.Fatalf("/model: %q", got)
		}
		for _, bad := range []string{"/model gpt-z", "/think hard"} {
			if got := say(msg("b"+bad, bad)); !strings.Contains(got, "Nothing changed") {
				t.Fatalf("%s: %q", bad, got)
			}
		}
		if got := say(msg("3", "/model GPT-B")); got != "From your next message on, this conversation runs on openai/gpt-b." {
			t.Fatalf("/model GPT-B: %q", got)
		}
		if got := say(msg("4", "/think high")); !strings.Contains(got, "high") {
			t.Fatalf("/think high: %q", got)
		}
		if m := meta(); m["model"] != "openai/gpt-b" || m["reasoning_effort"] != "high" {
			t.Fatalf("metadata %v", m)
		}
		if got := say(msg("5", "/think")); got != "Thinking: high. Set it with /think off, low, medium or high." {
			t.Fatalf("/think: %q", got)
		}
		// Back to the agent's own model: no override is kept.
		say(msg("6", "/model openai/gpt-a"))
		if m := meta(); m["model"] != "" {
			t.Fatalf("metadata after choosing the agent's own model: %v", m)
		}

		say(msg("10", "one"))
		say(msg("11", "two"))
		if got := say(msg("12", "/undo")); got != `Undone: "two" and its answer are out of the conversation (kept in its history).` {
			t.Fatalf("/undo: %q", got)
		}
		if got := live(); got != "one | echo: one" {
			t.Fatalf("live after /undo: %s", got)
		}
		if got := say(msg("13", "/retry")); got != "echo: one" {
			t.Fatalf("/retry: %q", got)
		}
		if got := live(); got != "one | echo: one" {
			t.Fatalf("live after /retry: %s", got)
		}

		say(msg("14", "three"))
		edit := msg("14:edit:1", "three, edited")
		edit.Edits = "14"
		if got := say(edit); got != "echo: three, edited" {
			t.Fatalf("an edit of the latest message: %q", got)
		}
		if got := live(); got != "one | echo: one | three, edited | echo: three, edited" {
			t.Fatalf("live after the edit: %s", got)
		}
		old := msg("10:edit:1", "one, edited")
		old.Edits = "10"
		if got := say(old); !strings.HasPrefix(got, "Noted your edit of an earlier message.") {
			t.Fatalf("an edit of an older message: %q", got)
		}
		before := live()
		if !strings.HasSuffix(before, " | (edited an earlier message to:) one, edited") {
			t.Fatalf("live after an older edit: %s", before)
		}
		for _, id := range []string{"999", "3"} { // never sent; a command
			gone := msg(id+":edit:1", "what?")
			gone.Edits = id
			if got := say(gone); !strings.Contains(got, "can't find the message you edited") {
				t.Fatalf("an edit of message %s: %q", id, got)
			}
		}
		if got := live(); got != before {
			t.Fatalf("edits of messages that aren't there changed the history: %s", got)
		}
	})
}

// A /retry or an edit cut short by a crash after its rewind, before its
// turn stored anything, is run again on recovery without taking back a
// second exchange: the retry answers the message it retried, the edit is
// answered from its new text, and the earlier exchange stays. (Run again,
// each had rewound once more: the retry took back "one" and answered it,
// the edit was only noted as an edit of an older message.)
func TestRetryAndEditRunAgainAfterACrashRewindOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		for _, c := range []struct {
			name, text, edits, stall, want, live string
		}{
			{"retry", "/retry", "", "two", "echo: two", "one | echo: one | two | echo: two"},
			{"edit", "two, edited", "2", "two, edited", "echo: two, edited", "one | echo: one | two, edited | echo: two, edited"},
		} {
			t.Run(c.name, func(t *testing.T) {
				db := open(t)
				store := sessions.NewStore(db)
				ctx := context.Background()
				turns := make(chan string, 4)
				stall := false
				// The turn stores its message and reply, as the agent does;
				// the stalled one stores nothing until the shutdown cuts it.
				run := func(ctx context.Context, in gateway.TurnInput) (string, error) {
					if stall && in.Messages[0].Text == c.stall {
						turns <- "stalled"
						<-ctx.Done()
						return "", ctx.Err()
					}
					reply, _ := echoRun(ctx, in)
					for i, m := range in.Messages {
						if _, err := store.Append(ctx, in.Session.ID, sessions.Message{ID: sessions.MessageID(in.IDs[i]), Role: sessions.RoleUser, Content: m.Text}); err != nil {
							return "", err
						}
					}
					_, err := store.Append(ctx, in.Session.ID, sessions.Message{Role: sessions.RoleAssistant, Content: reply})
					turns <- reply
					return reply, err
				}
				gw, err := gateway.New(gateway.Options{Store: gateway.NewStore(db, nil), Sessions: store,
					Agents: []gateway.Agent{{ID: "default"}}, Runner: gateway.RunFunc(run)})
				if err != nil {
					t.Fatal(err)
				}
				for i, text := range []string{"one", "two"} {
					if err := gw.Deliver(ctx, msg(fmt.Sprint(i+1), text)); err != nil {
						t.Fatal(err)
					}
					<-turns
				}
				stall = true
				in := msg("3", c.text)
				in.Edits = c.edits
				if err := gw.Deliver(ctx, in); err != nil {
					t.Fatal(err)
				}
				<-turns
				closeCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				if err := gw.Close(closeCtx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Close = %v", err)
				}

				stall = false
				r := newRig(t, db, run, func(o *gateway.Options) { o.Sessions = store })
				if n, err := r.gw.Recover(r.ctx); err != nil || n != 1 {
					t.Fatalf("Recover = %d, %v", n, err)
				}
				if got := r.sent(3)[2]; got != c.want {
					t.Fatalf("answered after the restart with %q, want %q", got, c.want)
				}
				s, err := store.Active(ctx, gateway.SessionKey(msg("0", ""), "default"))
				if err != nil {
					t.Fatal(err)
				}
				msgs, err := store.Messages(ctx, s.ID, sessions.MessagesOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var live []string
				for _, m := range msgs {
					live = append(live, m.Content)
				}
				if got := strings.Join(live, " | "); got != c.live {
					t.Fatalf("live after the restart: %s; want %s", got, c.live)
				}
			})
		}
	})
}
