package sessions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// conversation appends alternating user and assistant messages named by
// contents, and returns them by content.
func conversation(t *testing.T, st *sessions.SQLStore, id sessions.ID, contents ...string) map[string]sessions.Message {
	t.Helper()
	out := map[string]sessions.Message{}
	for _, c := range contents {
		m := sessions.Message{Role: sessions.RoleUser, Content: c}
		if strings.HasPrefix(c, "a") {
			m.Role = sessions.RoleAssistant
			m.Usage = &sessions.Usage{Input: 10, Output: 2, CacheRead: 1, CostUSD: 0.5}
		}
		stored, err := st.Append(context.Background(), id, m)
		if err != nil {
			t.Fatal(err)
		}
		out[c] = stored
	}
	return out
}

func contents(t *testing.T, st *sessions.SQLStore, id sessions.ID, opts sessions.MessagesOptions) string {
	t.Helper()
	msgs, err := st.Messages(context.Background(), id, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[sessions.MessageID]bool{}
	for _, m := range msgs {
		if seen[m.ID] {
			t.Fatalf("message %s (%s) listed twice", m.ID, m.Content)
		}
		seen[m.ID] = true
		s := m.Content
		if !m.HiddenAt.IsZero() {
			s += "(h)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func liveTokens(t *testing.T, st *sessions.SQLStore, id sessions.ID) int64 {
	t.Helper()
	msgs, err := st.Messages(context.Background(), id, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, m := range msgs {
		n += m.TokenEstimate
	}
	return n
}

func newSession(t *testing.T, st *sessions.SQLStore) sessions.Session {
	t.Helper()
	s, _, err := st.Resolve(context.Background(), sessions.ChatKey("telegram", "1", "u", "main"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRewind(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		st := sessions.NewStore(open(t))
		s := newSession(t, st)
		m := conversation(t, st, s.ID, "u1", "a1", "u2", "a2", "u3", "a3")

		for _, tc := range []struct {
			name string
			to   sessions.MessageID
			want error
		}{
			{"assistant message", m["a1"].ID, sessions.ErrInvalidMessage},
			{"last message", m["u3"].ID, nil}, // hides a3
			{"unknown message", "01900000-0000-7000-8000-000000000000", sessions.ErrNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := st.Rewind(ctx, s.ID, tc.to)
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
			})
		}
		if _, err := st.Unrewind(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Rewind(ctx, "01900000-0000-7000-8000-000000000000", m["u1"].ID); !errors.Is(err, sessions.ErrNotFound) {
			t.Fatalf("unknown session: %v", err)
		}

		res, err := st.Rewind(ctx, s.ID, m["u2"].ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Hidden != 3 || res.Restored != 0 {
			t.Fatalf("result %+v", res)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1 a1 u2" {
			t.Fatalf("live after rewind: %s", got)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{Hidden: true}); got != "u1 a1 u2 a2(h) u3(h) a3(h)" {
			t.Fatalf("history after rewind: %s", got)
		}
		if res.Session.Rollup.TokenCount != liveTokens(t, st, s.ID) || res.Session.MessageCount != 6 {
			t.Fatalf("rollup %+v, live tokens %d", res.Session, liveTokens(t, st, s.ID))
		}
		// Rewinding to a hidden message is refused.
		if _, err := st.Rewind(ctx, s.ID, m["u3"].ID); !errors.Is(err, sessions.ErrInvalidMessage) {
			t.Fatalf("rewind to hidden: %v", err)
		}
		// A second, deeper rewind stacks; unrewinds undo them in turn.
		if _, err := st.Rewind(ctx, s.ID, m["u1"].ID); err != nil {
			t.Fatal(err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1" {
			t.Fatalf("live after second rewind: %s", got)
		}
		if _, err := st.Unrewind(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1 a1 u2" {
			t.Fatalf("after first unrewind: %s", got)
		}
		res, err = st.Unrewind(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{Hidden: true}); got != "u1 a1 u2 a2 u3 a3" || res.Hidden != 3 {
			t.Fatalf("after second unrewind: %s (%+v)", got, res)
		}
		if res.Session.Rollup.TokenCount != liveTokens(t, st, s.ID) {
			t.Fatalf("token count %d, live %d", res.Session.Rollup.TokenCount, liveTokens(t, st, s.ID))
		}
		if _, err := st.Unrewind(ctx, s.ID); !errors.Is(err, sessions.ErrNothingToUnrewind) {
			t.Fatalf("nothing left: %v", err)
		}

		// Once the conversation goes on, the rewind can't be undone.
		if _, err := st.Rewind(ctx, s.ID, m["u3"].ID); err != nil {
			t.Fatal(err)
		}
		conversation(t, st, s.ID, "a3bis")
		if _, err := st.Unrewind(ctx, s.ID); !errors.Is(err, sessions.ErrConflict) {
			t.Fatalf("unrewind after new messages: %v", err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1 a1 u2 a2 u3 a3bis" {
			t.Fatalf("live: %s", got)
		}
	})
}

func TestRewindAcrossCompaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		st := sessions.NewStore(open(t))
		s := newSession(t, st)
		m := conversation(t, st, s.ID, "u1", "a1", "u2", "a2", "u3", "a3")
		c1, err := st.Compact(ctx, s.ID, sessions.CompactInput{Through: m["a1"].Seq, Expect: 2, Summary: "S1"})
		if err != nil {
			t.Fatal(err)
		}
		conversation(t, st, s.ID, "u4", "a4")
		// The second compaction archives the first summary too.
		if _, err := st.Compact(ctx, s.ID, sessions.CompactInput{Through: m["a2"].Seq, Expect: 3, Summary: "S2"}); err != nil {
			t.Fatal(err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "S2 u3 a3 u4 a4" {
			t.Fatalf("live before: %s", got)
		}
		full := contents(t, st, s.ID, sessions.MessagesOptions{Archived: true, Hidden: true})
		if full != "u1 a1 S1 u2 a2 S2 u3 a3 u4 a4" {
			t.Fatalf("full history before: %s", full)
		}

		// Back to u2, archived by the second compaction.
		res, err := st.Rewind(ctx, s.ID, m["u2"].ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Restored != 1 || res.Session.CompactionSummary != "S1" {
			t.Fatalf("rewind to u2: %+v", res)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "S1 u2" {
			t.Fatalf("live after rewind to u2: %s", got)
		}
		if _, err := st.Unrewind(ctx, s.ID); err != nil {
			t.Fatal(err)
		}

		// Back to u1, behind both compactions.
		res, err = st.Rewind(ctx, s.ID, m["u1"].ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Restored != 2 || res.Session.CompactionSummary != "" {
			t.Fatalf("rewind to u1: %+v", res)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1" {
			t.Fatalf("live after rewind to u1: %s", got)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{Hidden: true}); got != "u1 a1(h) u2(h) a2(h) u3(h) a3(h) u4(h) a4(h)" {
			t.Fatalf("history after rewind: %s", got)
		}
		// Nothing lost: every message is still there exactly once.
		if got := contents(t, st, s.ID, sessions.MessagesOptions{Archived: true, Hidden: true}); strings.Count(got, " ")+1 != 10 {
			t.Fatalf("full history after rewind: %s", got)
		}
		if res.Session.Rollup.TokenCount != liveTokens(t, st, s.ID) {
			t.Fatalf("token count %d, live %d", res.Session.Rollup.TokenCount, liveTokens(t, st, s.ID))
		}

		res, err = st.Unrewind(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Restored != 2 || res.Session.CompactionSummary != "S2" {
			t.Fatalf("unrewind: %+v", res)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "S2 u3 a3 u4 a4" {
			t.Fatalf("live after unrewind: %s", got)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{Archived: true, Hidden: true}); got != full {
			t.Fatalf("full history after unrewind: %s, want %s", got, full)
		}
		msgs, _ := st.Messages(ctx, s.ID, sessions.MessagesOptions{Archived: true})
		for _, x := range msgs {
			if x.Content == "u1" && x.CompactionID != string(c1.Summary.ID) {
				t.Fatalf("u1 filed under compaction %q, want %q", x.CompactionID, c1.Summary.ID)
			}
		}
		// A compaction over the restored history still works afterwards.
		if _, err := st.Compact(ctx, s.ID, sessions.CompactInput{Through: m["a3"].Seq, Expect: 3, Summary: "S3"}); err != nil {
			t.Fatalf("compact after unrewind: %v", err)
		}
	})
}

func TestBranch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		st := sessions.NewStore(open(t))
		s := newSession(t, st)
		m := conversation(t, st, s.ID, "u1", "a1")
		if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "secret", HiddenAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		for k, v := range conversation(t, st, s.ID, "u2", "a2", "u3") {
			m[k] = v
		}
		model := "echo"
		if _, err := st.Update(ctx, s.ID, sessions.Update{Model: &model}); err != nil {
			t.Fatal(err)
		}

		b, err := st.Branch(ctx, s.ID, m["a2"].ID, sessions.BranchOptions{Metadata: json.RawMessage(`{"note":"x"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if b.ParentID != s.ID || b.ParentMessageID != m["a2"].ID || b.Key.Surface != sessions.SurfaceAPI ||
			b.Key.AgentID != "main" || b.Key.UserID != "u" || b.Status != sessions.StatusActive {
			t.Fatalf("branch %+v", b)
		}
		if !sameJSON(b.Metadata, `{"model":"echo","note":"x"}`) {
			t.Fatalf("metadata %s", b.Metadata)
		}
		copies, err := st.Messages(ctx, b.ID, sessions.MessagesOptions{Hidden: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		var tokens, prompt int64
		for i, c := range copies {
			got = append(got, c.Content)
			if c.ID == m[c.Content].ID || c.SessionID != b.ID || c.Seq != int64(i+1) {
				t.Fatalf("copy %d: %+v", i, c)
			}
			tokens += c.TokenEstimate
			if c.Usage != nil {
				prompt += c.Usage.Input
			}
		}
		if fmt.Sprint(got) != "[u1 a1 u2 a2]" {
			t.Fatalf("copied %v", got)
		}
		if b.MessageCount != 4 || b.LastSeq != 4 || b.Rollup.TokenCount != tokens || b.Rollup.PromptTokens != prompt ||
			prompt != 20 || b.Rollup.CostUSD != 1 {
			t.Fatalf("rollup %+v (tokens %d prompt %d)", b, tokens, prompt)
		}
		// The branch goes on independently.
		if _, err := st.Append(ctx, b.ID, sessions.Message{Role: sessions.RoleUser, Content: "u3b"}); err != nil {
			t.Fatal(err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1 a1 u2 a2 u3" {
			t.Fatalf("parent changed: %s", got)
		}

		side, err := st.Branch(ctx, s.ID, m["u1"].ID, sessions.BranchOptions{Metadata: json.RawMessage(`{"ephemeral":true}`)})
		if err != nil {
			t.Fatal(err)
		}
		page, err := st.List(ctx, sessions.ListOptions{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Sessions {
			if x.ID == side.ID {
				t.Fatal("an ephemeral branch is listed")
			}
		}
		if len(page.Sessions) != 2 {
			t.Fatalf("listed %d sessions", len(page.Sessions))
		}
		page, _ = st.List(ctx, sessions.ListOptions{Limit: 10, Ephemeral: true})
		if len(page.Sessions) != 3 || page.Sessions[0].ID != side.ID {
			t.Fatalf("with ephemeral: %d", len(page.Sessions))
		}

		hidden, _ := st.Messages(ctx, s.ID, sessions.MessagesOptions{Hidden: true})
		for _, tc := range []struct {
			name string
			from sessions.MessageID
			meta string
			want error
		}{
			{"hidden fork point", hidden[2].ID, "", sessions.ErrInvalidMessage},
			{"unknown message", "01900000-0000-7000-8000-000000000000", "", sessions.ErrNotFound},
			{"message of another session", copies[0].ID, "", sessions.ErrNotFound},
			{"bad metadata", m["u1"].ID, `[1]`, sessions.ErrInvalidMetadata},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := st.Branch(ctx, s.ID, tc.from, sessions.BranchOptions{Metadata: json.RawMessage(tc.meta)})
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
			})
		}
		if _, err := st.Compact(ctx, s.ID, sessions.CompactInput{Through: m["a1"].Seq, Expect: 2, Summary: "S"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Branch(ctx, s.ID, m["u1"].ID, sessions.BranchOptions{}); !errors.Is(err, sessions.ErrInvalidMessage) {
			t.Fatalf("archived fork point: %v", err)
		}
		// A branch after a compaction starts from its summary.
		c, err := st.Branch(ctx, s.ID, m["u2"].ID, sessions.BranchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := contents(t, st, c.ID, sessions.MessagesOptions{}); got != "S u2" || c.CompactionSummary != "S" {
			t.Fatalf("branch after compaction: %s %+v", got, c)
		}
	})
}

// RewindFrom hides the user message itself and what follows it: the
// session goes back to before it was sent, and unrewind brings it back.
func TestRewindFrom(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		st := sessions.NewStore(open(t))
		s := newSession(t, st)
		m := conversation(t, st, s.ID, "u1", "a1", "u2", "a2")
		if _, err := st.RewindFrom(ctx, s.ID, m["a2"].ID); !errors.Is(err, sessions.ErrInvalidMessage) {
			t.Fatalf("from an assistant message: %v", err)
		}
		res, err := st.RewindFrom(ctx, s.ID, m["u2"].ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Hidden != 2 {
			t.Fatalf("hid %d, want 2", res.Hidden)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{Hidden: true}); got != "u1 a1 u2(h) a2(h)" {
			t.Fatalf("history: %s", got)
		}
		if res.Session.Rollup.TokenCount != liveTokens(t, st, s.ID) {
			t.Fatalf("token count %d, live %d", res.Session.Rollup.TokenCount, liveTokens(t, st, s.ID))
		}
		// The first message too: nothing is left live, nothing is deleted.
		if _, err := st.RewindFrom(ctx, s.ID, m["u1"].ID); err != nil {
			t.Fatal(err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "" {
			t.Fatalf("live: %q", got)
		}
		for range 2 {
			if _, err := st.Unrewind(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1 a1 u2 a2" {
			t.Fatalf("after unrewinds: %s", got)
		}
	})
}

// RewindFromOnce makes its rewind once under its key: RewoundBy finds the
// message it took back from, hidden, a second rewind under the key is a
// conflict that changes nothing, and Unrewind still undoes the latest
// rewind first whatever the rewinds' ids.
func TestRewindFromOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		st := sessions.NewStore(open(t))
		s := newSession(t, st)
		m := conversation(t, st, s.ID, "u1", "a1", "u2", "a2", "u3", "a3")
		if _, ok, err := st.RewoundBy(ctx, s.ID, "inbound-1"); ok || err != nil {
			t.Fatalf("RewoundBy before the rewind = %v, %v", ok, err)
		}
		if _, err := st.RewindFromOnce(ctx, s.ID, m["u3"].ID, "inbound-1"); err != nil {
			t.Fatal(err)
		}
		got, ok, err := st.RewoundBy(ctx, s.ID, "inbound-1")
		if err != nil || !ok || got.ID != m["u3"].ID || got.Content != "u3" || got.HiddenAt.IsZero() {
			t.Fatalf("RewoundBy = %+v, %v, %v; want u3, hidden", got, ok, err)
		}
		if _, err := st.RewindFromOnce(ctx, s.ID, m["u2"].ID, "inbound-1"); !errors.Is(err, sessions.ErrConflict) {
			t.Fatalf("a second rewind under the key: %v", err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1 a1 u2 a2" {
			t.Fatalf("live after a refused second rewind: %s", got)
		}
		// A plain rewind after it (a uuid id, sorting before "once:…"), then
		// two unrewinds: the latest goes first.
		if _, err := st.RewindFrom(ctx, s.ID, m["u2"].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Unrewind(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1 a1 u2 a2" {
			t.Fatalf("after one unrewind: %s", got)
		}
		if _, err := st.Unrewind(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if got := contents(t, st, s.ID, sessions.MessagesOptions{}); got != "u1 a1 u2 a2 u3 a3" {
			t.Fatalf("after both unrewinds: %s", got)
		}
		// Another session's rewind under the same key is its own.
		other, _, err := st.Resolve(ctx, sessions.ChatKey("telegram", "2", "v", "main"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		om := conversation(t, st, other.ID, "o1", "p1", "o2", "p2")
		if _, err := st.RewindFromOnce(ctx, other.ID, om["o2"].ID, "inbound-1"); err != nil {
			t.Fatalf("another session's rewind under the same key: %v", err)
		}
		if got, ok, err := st.RewoundBy(ctx, other.ID, "inbound-1"); err != nil || !ok || got.ID != om["o2"].ID {
			t.Fatalf("RewoundBy in the other session = %+v, %v, %v", got, ok, err)
		}
		if _, err := st.RewindFromOnce(ctx, s.ID, m["u3"].ID, ""); !errors.Is(err, sessions.ErrInvalidMessage) {
			t.Fatalf("a rewind made once without a key: %v", err)
		}
	})
}
