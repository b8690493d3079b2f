package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

func testAppendOrder(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	for i := 1; i <= 20; i++ {
		m := e.append(s.ID, sessions.RoleUser, fmt.Sprintf("m%d", i))
		if m.Seq != int64(i) {
			e.t.Fatalf("message %d got seq %d", i, m.Seq)
		}
	}
	msgs, err := e.store.Messages(e.ctx, s.ID, sessions.MessagesOptions{})
	if err != nil || len(msgs) != 20 {
		e.t.Fatalf("Messages: %d %v", len(msgs), err)
	}
	for i, m := range msgs {
		if m.Seq != int64(i+1) || m.Content != fmt.Sprintf("m%d", i+1) {
			e.t.Fatalf("message %d: seq %d content %q", i, m.Seq, m.Content)
		}
	}
	if _, err := e.store.Append(e.ctx, "0190c7a0-0000-7000-8000-000000000000", sessions.Message{Role: sessions.RoleUser}); !errors.Is(err, sessions.ErrNotFound) {
		e.t.Fatalf("Append to unknown session: %v", err)
	}
	if _, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: "robot"}); !errors.Is(err, sessions.ErrInvalidMessage) {
		e.t.Fatalf("Append with a bad role: %v", err)
	}
	if got := e.session(s.ID); got.MessageCount != 20 || got.LastSeq != 20 {
		e.t.Fatalf("a rejected append changed the session: %+v", got)
	}
}

func testConcurrentAppend(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: fmt.Sprintf("%d-%d", w, i)}); err != nil {
					e.t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	msgs, err := e.store.Messages(e.ctx, s.ID, sessions.MessagesOptions{})
	if err != nil || len(msgs) != writers*each {
		e.t.Fatalf("Messages: %d %v", len(msgs), err)
	}
	last := map[int]int{}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			e.t.Fatalf("seq gap or duplicate at %d: %d", i, m.Seq)
		}
		var w, n int
		fmt.Sscanf(m.Content, "%d-%d", &w, &n)
		if prev, ok := last[w]; ok && n <= prev {
			e.t.Fatalf("writer %d's messages out of order: %d after %d", w, n, prev)
		}
		last[w] = n
	}
}

func testMessageRoundTrip(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	in := sessions.Message{
		Role:       sessions.RoleAssistant,
		Content:    "calling a tool — ünïcode ✓",
		Parts:      []sessions.Part{{Type: "image", MediaType: "image/png", URL: "tg://file/1", Name: "cat.png"}, {Type: "reasoning", Text: "hmm"}},
		ToolCalls:  []sessions.ToolCall{{ID: "call_1", Name: "memory_search", Arguments: json.RawMessage(`{"query":"cats"}`)}},
		Model:      "openai/gpt-4o-mini",
		Usage:      &sessions.Usage{Input: 100, Output: 20, Reasoning: 5, CacheRead: 50, CacheWrite: 10, CostUSD: 0.0012},
		Synthetic:  true,
		Summary:    false,
		ToolCallID: "",
	}
	got := e.append(s.ID, in.Role, "") // a plain one first, so seq 2 is checked too
	if got.Seq != 1 {
		e.t.Fatalf("seq %d", got.Seq)
	}
	out, err := e.store.Append(e.ctx, s.ID, in)
	if err != nil {
		e.t.Fatal(err)
	}
	tool, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleTool, ToolCallID: "call_1", Content: `{"hits":[]}`})
	if err != nil {
		e.t.Fatal(err)
	}
	msgs, err := e.store.Messages(e.ctx, s.ID, sessions.MessagesOptions{})
	if err != nil || len(msgs) != 3 {
		e.t.Fatalf("Messages: %d %v", len(msgs), err)
	}
	if !reflect.DeepEqual(msgs[1], out) {
		e.t.Fatalf("round trip:\n got %+v\nwant %+v", msgs[1], out)
	}
	if msgs[1].Content != in.Content || msgs[1].Usage == nil || *msgs[1].Usage != *in.Usage || len(msgs[1].Parts) != 2 {
		e.t.Fatalf("fields lost: %+v", msgs[1])
	}
	if msgs[2].ToolCallID != "call_1" || msgs[2].Role != sessions.RoleTool || msgs[2].ID != tool.ID {
		e.t.Fatalf("tool result: %+v", msgs[2])
	}
	if msgs[2].TokenEstimate != 4 { // `{"hits":[]}` is 11 chars of JSON: ceil(11/3)
		e.t.Fatalf("tool result estimate %d, want 4", msgs[2].TokenEstimate)
	}
}

func testRollups(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	e.clock.Advance(time.Minute)
	u1 := e.append(s.ID, sessions.RoleUser, "hello there") // 11 chars: 3 tokens
	e.clock.Advance(time.Minute)
	a1, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "hi",
		Usage: &sessions.Usage{Input: 100, Output: 10, Reasoning: 3, CacheRead: 40, CacheWrite: 7, CostUSD: 0.25}})
	if err != nil {
		e.t.Fatal(err)
	}
	a2, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "again", TokenEstimate: 50,
		Usage: &sessions.Usage{Input: 1, Output: 2, Reasoning: 3, CacheRead: 4, CacheWrite: 5, CostUSD: 0.5}})
	if err != nil {
		e.t.Fatal(err)
	}
	got := e.session(s.ID)
	want := sessions.Rollup{
		TokenCount: u1.TokenEstimate + a1.TokenEstimate + 50, PromptTokens: 101, CompletionTokens: 12,
		ReasoningTokens: 6, CacheRead: 44, CacheWrite: 12, CostUSD: 0.75,
	}
	if u1.TokenEstimate != 3 || a2.TokenEstimate != 50 {
		e.t.Fatalf("estimates: %d %d", u1.TokenEstimate, a2.TokenEstimate)
	}
	if got.Rollup != want {
		e.t.Fatalf("rollup\n got %+v\nwant %+v", got.Rollup, want)
	}
	if got.MessageCount != 3 || got.LastSeq != 3 {
		e.t.Fatalf("counts: %d messages, last seq %d", got.MessageCount, got.LastSeq)
	}
	if !got.LastActiveAt.Equal(e.clock.Now()) {
		e.t.Fatalf("last_active_at %v, want %v", got.LastActiveAt, e.clock.Now())
	}
}

func testLiveContextAndHistory(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	for i := 1; i <= 4; i++ {
		e.append(s.ID, sessions.RoleUser, fmt.Sprintf("old %d", i))
	}
	e.append(s.ID, sessions.RoleUser, "new 1")
	hidden := e.append(s.ID, sessions.RoleAssistant, "rewound")
	e.append(s.ID, sessions.RoleUser, "new 2")
	// Stand-ins for what compaction and rewind do, which later code owns:
	// archive seq 1-4 and put the summary in at the last archived seq; and,
	// as they do, change the session's row.
	w := e.db.Writer()
	now := dbutil.Millis(e.clock.Now())
	for _, q := range []string{
		`UPDATE messages SET hidden_at = $2 WHERE id = $1`,
		`INSERT INTO message_archive (id, session_id, seq, role, content, created_at, archived_at, compaction_id)
		SELECT id, session_id, seq, role, content, created_at, $2, 'c1' FROM messages WHERE session_id = (SELECT session_id FROM messages WHERE id = $1) AND seq <= 4`,
		`DELETE FROM messages WHERE session_id = (SELECT session_id FROM messages WHERE id = $1) AND seq <= 4 AND created_at <= $2`,
		`INSERT INTO messages (id, session_id, seq, role, content, summary, created_at)
		SELECT '0190c7a0-0000-7000-8000-0000000000aa', session_id, 4, 'system', 'summary', TRUE, $2 FROM messages WHERE id = $1`,
		`UPDATE sessions SET revision = revision + 1, updated_at = $2 WHERE id = (SELECT session_id FROM messages WHERE id = $1)`,
	} {
		if _, err := w.ExecContext(e.ctx, q, hidden.ID, now); err != nil {
			e.t.Fatal(err)
		}
	}

	contents := func(opts sessions.MessagesOptions) []string {
		msgs, err := e.store.Messages(e.ctx, s.ID, opts)
		if err != nil {
			e.t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			c := m.Content
			if m.Archived() {
				c += " (archived)"
			}
			out = append(out, c)
		}
		return out
	}
	cases := []struct {
		name string
		opts sessions.MessagesOptions
		want []string
	}{
		{"live context", sessions.MessagesOptions{}, []string{"summary", "new 1", "new 2"}},
		{"with hidden", sessions.MessagesOptions{Hidden: true}, []string{"summary", "new 1", "rewound", "new 2"}},
		{"with archive", sessions.MessagesOptions{Archived: true}, []string{"old 1 (archived)", "old 2 (archived)", "old 3 (archived)", "old 4 (archived)", "summary", "new 1", "new 2"}},
		{"everything", sessions.MessagesOptions{Archived: true, Hidden: true}, []string{"old 1 (archived)", "old 2 (archived)", "old 3 (archived)", "old 4 (archived)", "summary", "new 1", "rewound", "new 2"}},
	}
	for _, tc := range cases {
		if got := contents(tc.opts); !reflect.DeepEqual(got, tc.want) {
			e.t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	if _, err := e.store.Messages(e.ctx, "0190c7a0-0000-7000-8000-000000000000", sessions.MessagesOptions{}); !errors.Is(err, sessions.ErrNotFound) {
		e.t.Fatalf("Messages of an unknown session: %v", err)
	}
	empty, _ := e.resolve(sessions.ChatKey("telegram", "empty", "empty", "default"), sessions.Policy{})
	if msgs, err := e.store.Messages(e.ctx, empty.ID, sessions.MessagesOptions{}); err != nil || len(msgs) != 0 {
		e.t.Fatalf("Messages of an empty session: %d %v", len(msgs), err)
	}
}

// Both engines store the same thing for text PostgreSQL would refuse.
func testAwkwardText(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	cases := []struct{ in, want string }{
		{"nul\x00byte", "nulbyte"},
		{"caf\xe9", "caf\uFFFD"},
		{"emoji 😀 and ünïcode", "emoji 😀 and ünïcode"},
	}
	for _, tc := range cases {
		m, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: tc.in,
			ToolCalls: []sessions.ToolCall{{ID: "c", Name: "t", Arguments: json.RawMessage(`{"s":"\u0000","b":1}`)}}})
		if err != nil {
			e.t.Fatalf("Append(%q): %v", tc.in, err)
		}
		if m.Content != tc.want {
			e.t.Errorf("Append(%q) returned %q, want %q", tc.in, m.Content, tc.want)
		}
	}
	msgs, err := e.store.Messages(e.ctx, s.ID, sessions.MessagesOptions{})
	if err != nil || len(msgs) != len(cases) {
		e.t.Fatalf("Messages: %d %v", len(msgs), err)
	}
	for i, tc := range cases {
		if msgs[i].Content != tc.want {
			e.t.Errorf("stored %q, want %q", msgs[i].Content, tc.want)
		}
		if got := string(msgs[i].ToolCalls[0].Arguments); got != `{"s":"\u0000","b":1}` {
			e.t.Errorf("tool-call arguments changed: %s", got)
		}
	}
	if _, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant,
		ToolCalls: []sessions.ToolCall{{ID: "c", Name: "t", Arguments: json.RawMessage(`{not json`)}}}); !errors.Is(err, sessions.ErrInvalidMessage) {
		t := e.t
		t.Fatalf("invalid tool-call JSON: %v", err)
	}
}

// A message with its own id is stored once, however often it is appended.
func testIdempotentAppend(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	id := sessions.MessageID("0190c7a0-0000-7000-8000-0000000000bb")
	first, err := e.store.Append(e.ctx, s.ID, sessions.Message{ID: id, Role: sessions.RoleUser, Content: "once"})
	if err != nil {
		e.t.Fatal(err)
	}
	again, err := e.store.Append(e.ctx, s.ID, sessions.Message{ID: id, Role: sessions.RoleUser, Content: "once"})
	if err != nil || again.ID != id || again.Seq != first.Seq {
		e.t.Fatalf("second append: %+v %v", again, err)
	}
	if got := e.session(s.ID); got.MessageCount != 1 || got.LastSeq != 1 {
		e.t.Fatalf("a repeated append changed the session: %+v", got)
	}
	other, _ := e.resolve(sessions.ChatKey("telegram", "other", "other", "default"), sessions.Policy{})
	if _, err := e.store.Append(e.ctx, other.ID, sessions.Message{ID: id, Role: sessions.RoleUser}); !errors.Is(err, sessions.ErrInvalidMessage) {
		e.t.Fatalf("the same id in another session: %v", err)
	}
	if _, err := e.store.Append(e.ctx, s.ID, sessions.Message{ID: "not-a-uuid", Role: sessions.RoleUser}); !errors.Is(err, sessions.ErrInvalidMessage) {
		e.t.Fatalf("a malformed id: %v", err)
	}
}

// A turn in flight when its session resets still records its reply.
func testAppendToArchived(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	e.append(s.ID, sessions.RoleUser, "question")
	if _, err := e.store.Reset(e.ctx, dm); err != nil {
		e.t.Fatal(err)
	}
	e.append(s.ID, sessions.RoleAssistant, "late answer")
	got := e.session(s.ID)
	if got.Status != sessions.StatusArchived || got.MessageCount != 2 {
		e.t.Fatalf("archived session after a late reply: %+v", got)
	}
}

// A failed insert leaves no trace in the session's rollups.
func testAppendRollsBack(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	e.append(s.ID, sessions.RoleUser, "one")
	before := e.session(s.ID)
	// Occupy the next seq so the insert fails after the rollup update.
	if _, err := e.db.Writer().ExecContext(e.ctx, `INSERT INTO messages (id, session_id, seq, role, created_at) VALUES ('0190c7a0-0000-7000-8000-0000000000cc', $1, 2, 'user', 0)`, s.ID); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "two",
		Usage: &sessions.Usage{Input: 5, Output: 5}}); err == nil {
		e.t.Fatal("append over an occupied seq succeeded")
	}
	after := e.session(s.ID)
	if after.Rollup != before.Rollup || after.LastSeq != before.LastSeq || after.MessageCount != before.MessageCount {
		e.t.Fatalf("a failed append changed the session:\nbefore %+v\nafter  %+v", before, after)
	}
}

// A message's metadata is stored as given, moves with it to the archive and
// into a branch, and must be a JSON object.
func testMetadataTravels(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	const meta = `{"system_prompt_digest":"sha256:00ff","n":1}`
	user, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "q", Metadata: json.RawMessage(`{"snapshot_id":"snap-1"}`)})
	if err != nil {
		e.t.Fatal(err)
	}
	reply, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "a", Metadata: json.RawMessage(meta)})
	if err != nil {
		e.t.Fatal(err)
	}
	plain := e.append(s.ID, sessions.RoleUser, "no metadata")
	if _, err := e.store.Append(e.ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "bad", Metadata: json.RawMessage(`[1]`)}); !errors.Is(err, sessions.ErrInvalidMessage) {
		e.t.Fatalf("metadata that is not an object: %v, want ErrInvalidMessage", err)
	}
	want := map[sessions.MessageID]string{user.ID: `{"snapshot_id":"snap-1"}`, reply.ID: meta, plain.ID: ""}
	check := func(what string, msgs []sessions.Message) {
		e.t.Helper()
		seen := 0
		for _, m := range msgs {
			if w, ok := want[m.ID]; ok {
				seen++
				if string(m.Metadata) != w {
					e.t.Fatalf("%s: message %q metadata %q, want %q", what, m.Content, m.Metadata, w)
				}
			}
		}
		if seen != len(want) {
			e.t.Fatalf("%s: %d of %d messages read", what, seen, len(want))
		}
	}
	live, err := e.store.Messages(e.ctx, s.ID, sessions.MessagesOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	check("live", live)
	// The reply branches with its metadata, before the archive moves it.
	b, err := e.store.Branch(e.ctx, s.ID, reply.ID, sessions.BranchOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	copied, err := e.store.Messages(e.ctx, b.ID, sessions.MessagesOptions{})
	if err != nil || len(copied) != 2 || string(copied[0].Metadata) != want[user.ID] || string(copied[1].Metadata) != meta {
		e.t.Fatalf("branch: %+v %v", copied, err)
	}
	if _, err := e.store.Compact(e.ctx, s.ID, sessions.CompactInput{Through: reply.Seq, Expect: 2, Summary: "sum"}); err != nil {
		e.t.Fatal(err)
	}
	all, err := e.store.Messages(e.ctx, s.ID, sessions.MessagesOptions{Archived: true})
	if err != nil {
		e.t.Fatal(err)
	}
	check("with the archive", all)
}
