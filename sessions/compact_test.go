package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

var compactNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

type compactEnv struct {
	t     *testing.T
	db    *dbutil.DB
	store *sessions.SQLStore
	ctx   context.Context
	sess  sessions.Session
}

func newCompactEnv(t *testing.T, open dbtest.Opener, n int) *compactEnv {
	t.Helper()
	db := open(t)
	e := &compactEnv{t: t, db: db, ctx: context.Background(),
		store: sessions.NewStore(db, sessions.WithClock(func() time.Time { return compactNow }))}
	s, _, err := e.store.Resolve(e.ctx, sessions.CLIKey("u1", "a1"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	e.sess = s
	for i := 1; i <= n; i++ {
		role := sessions.RoleUser
		if i%2 == 0 {
			role = sessions.RoleAssistant
		}
		e.append(sessions.Message{Role: role, Content: fmt.Sprintf("message %d", i)})
	}
	return e
}

func (e *compactEnv) append(m sessions.Message) sessions.Message {
	e.t.Helper()
	stored, err := e.store.Append(e.ctx, e.sess.ID, m)
	if err != nil {
		e.t.Fatal(err)
	}
	return stored
}

func (e *compactEnv) messages(opts sessions.MessagesOptions) []sessions.Message {
	e.t.Helper()
	msgs, err := e.store.Messages(e.ctx, e.sess.ID, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return msgs
}

func (e *compactEnv) session() sessions.Session {
	e.t.Helper()
	s, err := e.store.Session(e.ctx, e.sess.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *compactEnv) count(table string) int {
	e.t.Helper()
	var n int
	if err := e.db.Reader().QueryRowContext(e.ctx, "SELECT count(*) FROM "+table+" WHERE session_id = $1", e.sess.ID).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func contentsOf(msgs []sessions.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}

func sumEstimates(msgs []sessions.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += m.TokenEstimate
	}
	return n
}

func TestCompactArchivesAndInsertsSummary(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open, 12)
		flush := e.append(sessions.Message{Role: sessions.RoleUser, Content: "flush prompt", Synthetic: true})
		before := e.session()

		res, err := e.store.Compact(e.ctx, e.sess.ID, sessions.CompactInput{
			Through: 8, Expect: 8, Also: []sessions.MessageID{flush.ID},
			Summary: "## Goal\nTest.", Model: "echo", Usage: &sessions.Usage{Input: 100, Output: 20},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Archived != 9 || res.Summary.Seq != 8 || !res.Summary.Summary || res.Summary.Role != sessions.RoleSystem {
			t.Fatalf("result %+v", res)
		}
		live := e.messages(sessions.MessagesOptions{})
		want := []string{"## Goal\nTest.", "message 9", "message 10", "message 11", "message 12"}
		if got := contentsOf(live); !reflect.DeepEqual(got, want) {
			t.Fatalf("live context %q, want %q", got, want)
		}
		if live[0].ID != res.Summary.ID || !live[0].Summary {
			t.Fatalf("first live message is not the summary: %+v", live[0])
		}

		archived := e.messages(sessions.MessagesOptions{Archived: true})
		if len(archived) != 14 {
			t.Fatalf("full history has %d messages, want 12 + the flush prompt + the summary", len(archived))
		}
		var moved []string
		for _, m := range archived {
			if m.Archived() {
				moved = append(moved, m.Content)
				if m.CompactionID != string(res.Summary.ID) || !m.ArchivedAt.Equal(compactNow) {
					t.Errorf("archived %q with compaction %q at %v", m.Content, m.CompactionID, m.ArchivedAt)
				}
			}
		}
		wantMoved := []string{"message 1", "message 2", "message 3", "message 4", "message 5", "message 6",
			"message 7", "message 8", "flush prompt"}
		if !reflect.DeepEqual(moved, wantMoved) {
			t.Fatalf("archived %q, want %q", moved, wantMoved)
		}
		// The archived message with the summary's seq sorts before it.
		if archived[7].Content != "message 8" || archived[8].ID != res.Summary.ID {
			t.Fatalf("history order around the summary: %q", contentsOf(archived[6:10]))
		}

		after := e.session()
		if after.CompactionSummary != "## Goal\nTest." || after.Rollup.TokenCount != sumEstimates(live) ||
			res.TokensBefore != before.Rollup.TokenCount || res.TokensAfter != after.Rollup.TokenCount {
			t.Fatalf("session after: %+v; result %+v", after, res)
		}
		if after.LastSeq != before.LastSeq || after.MessageCount != before.MessageCount+1 ||
			after.Rollup.PromptTokens != before.Rollup.PromptTokens+100 || !after.LastActiveAt.Equal(before.LastActiveAt) {
			t.Fatalf("session before %+v, after %+v", before, after)
		}

		// The log goes on after the summary.
		next := e.append(sessions.Message{Role: sessions.RoleUser, Content: "next"})
		if next.Seq != before.LastSeq+1 {
			t.Fatalf("next seq %d, want %d", next.Seq, before.LastSeq+1)
		}
	})
}

// A second compaction archives the first summary beside the message whose
// seq it shares.
func TestCompactTwice(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open, 10)
		first, err := e.store.Compact(e.ctx, e.sess.ID, sessions.CompactInput{Through: 6, Expect: 6, Summary: "first"})
		if err != nil {
			t.Fatal(err)
		}
		for i := 11; i <= 16; i++ {
			e.append(sessions.Message{Role: sessions.RoleUser, Content: fmt.Sprintf("message %d", i)})
		}
		// Live: first (seq 6), 7..16; the second summary covers first..12.
		second, err := e.store.Compact(e.ctx, e.sess.ID, sessions.CompactInput{Through: 12, Expect: 7, Summary: "second"})
		if err != nil {
			t.Fatal(err)
		}
		if second.Archived != 7 {
			t.Fatalf("second compaction archived %d", second.Archived)
		}
		live := contentsOf(e.messages(sessions.MessagesOptions{}))
		if want := []string{"second", "message 13", "message 14", "message 15", "message 16"}; !reflect.DeepEqual(live, want) {
			t.Fatalf("live %q, want %q", live, want)
		}
		full := e.messages(sessions.MessagesOptions{Archived: true})
		if len(full) != 18 {
			t.Fatalf("full history has %d messages: %q", len(full), contentsOf(full))
		}
		for _, m := range full {
			if m.ID == first.Summary.ID && (!m.Archived() || m.CompactionID != string(second.Summary.ID)) {
				t.Fatalf("first summary: %+v", m)
			}
		}
		if got := e.session().CompactionSummary; got != "second" {
			t.Fatalf("compaction_summary %q", got)
		}
	})
}

// A compaction that fails anywhere changes nothing.
func TestCompactFailureChangesNothing(t *testing.T) {
	boom := errors.New("index write failed")
	cases := []struct {
		name string
		in   func(e *compactEnv) sessions.CompactInput
		want error
	}{
		{"the log changed", func(*compactEnv) sessions.CompactInput {
			return sessions.CompactInput{Through: 6, Expect: 5, Summary: "s"}
		}, sessions.ErrCompactionConflict},
		{"an extra message is gone", func(*compactEnv) sessions.CompactInput {
			return sessions.CompactInput{Through: 6, Expect: 6, Summary: "s", Also: []sessions.MessageID{"0190c7a0-0000-7000-8000-000000000000"}}
		}, sessions.ErrCompactionConflict},
		{"an extra message is summarized already", func(e *compactEnv) sessions.CompactInput {
			first := e.messages(sessions.MessagesOptions{})[0]
			return sessions.CompactInput{Through: 6, Expect: 6, Summary: "s", Also: []sessions.MessageID{first.ID}}
		}, sessions.ErrCompactionConflict},
		{"the in-transaction step fails", func(*compactEnv) sessions.CompactInput {
			return sessions.CompactInput{Through: 6, Expect: 6, Summary: "s",
				Tx: func(context.Context, dbutil.Querier, sessions.Message) error { return boom }}
		}, boom},
		{"no summary", func(*compactEnv) sessions.CompactInput {
			return sessions.CompactInput{Through: 6, Expect: 6, Summary: "  "}
		}, sessions.ErrInvalidMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
				e := newCompactEnv(t, open, 10)
				before, live := e.session(), e.messages(sessions.MessagesOptions{})
				_, err := e.store.Compact(e.ctx, e.sess.ID, tc.in(e))
				if !errors.Is(err, tc.want) {
					t.Fatalf("Compact = %v, want %v", err, tc.want)
				}
				if got := e.messages(sessions.MessagesOptions{}); !reflect.DeepEqual(got, live) {
					t.Fatalf("live context changed: %q", contentsOf(got))
				}
				if n := e.count("message_archive"); n != 0 {
					t.Fatalf("%d archived messages", n)
				}
				if after := e.session(); !reflect.DeepEqual(after, before) {
					t.Fatalf("session changed:\n%+v\n%+v", before, after)
				}
			})
		})
	}
}

func TestCompactUnknownSession(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open, 0)
		_, err := e.store.Compact(e.ctx, "0190c7a0-0000-7000-8000-000000000000", sessions.CompactInput{Through: 1, Expect: 1, Summary: "s"})
		if !errors.Is(err, sessions.ErrNotFound) {
			t.Fatalf("Compact = %v", err)
		}
	})
}
