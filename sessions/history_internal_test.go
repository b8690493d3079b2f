package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// A conversation reads its history from the database once at most: after
// that, each turn's read is the copy its appends kept up to date. One this
// store started never reads it: its empty history is the first copy. A
// cron run's session, one turn long, is not kept from the start.
func TestHistoryCacheServesTheNextTurn(t *testing.T) {
	for _, tc := range []struct {
		name         string
		key          Key
		elsewhere    bool // started by another store
		hits, misses int64
		unkept       int64 // first reads, only noted
	}{
		{"started here", ChatKey("telegram", "1", "1", "a"), false, 20, 0, 0},
		{"started elsewhere", ChatKey("telegram", "1", "1", "a"), true, 18, 1, 1},
		{"a cron run", Key{Surface: SurfaceCron, SurfaceID: "job:1", AgentID: "a"}, false, 18, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testHistoryCacheServesTheNextTurn(t, tc.key, tc.elsewhere, tc.hits, tc.misses, tc.unkept)
		})
	}
}

func testHistoryCacheServesTheNextTurn(t *testing.T, key Key, elsewhere bool, wantHits, wantMisses, wantUnkept int64) {
	ctx := context.Background()
	st := NewStore(dbtest.SQLite(t))
	starter := st
	if elsewhere {
		starter = NewStore(st.db)
	}
	s, _, err := starter.Resolve(ctx, key, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		for _, m := range []Message{{Role: RoleUser, Content: fmt.Sprint("u", i)}, {Role: RoleAssistant, Content: fmt.Sprint("a", i)}} {
			if _, err := st.Append(ctx, s.ID, m); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := st.Messages(ctx, s.ID, MessagesOptions{Turns: 3})
		if err != nil {
			t.Fatal(err)
		}
		if want := min(2*(i+1), 6); len(msgs) != want || msgs[len(msgs)-1].Content != fmt.Sprint("a", i) {
			t.Fatalf("turn %d read %d messages ending %q", i, len(msgs), msgs[len(msgs)-1].Content)
		}
	}
	// Elsewhere, the first read is only noted; the second is kept; the rest
	// are hits.
	if hits, misses := st.history.hits.Load(), st.history.misses.Load(); misses != wantMisses || hits != wantHits {
		t.Fatalf("%d reads from the cache and %d kept from the database; want %d and %d", hits, misses, wantHits, wantMisses)
	}
	// What the operator's metric reads: every read of the messages from
	// the database is a miss, kept or not.
	if hits, misses := st.HistoryCacheStats(); hits != wantHits || misses != wantMisses+wantUnkept {
		t.Fatalf("HistoryCacheStats = %d hits, %d misses; want %d and %d", hits, misses, wantHits, wantMisses+wantUnkept)
	}
	// A budget smaller than one session's history keeps nothing.
	small := NewStore(st.db, WithHistoryCache(100))
	for range 3 {
		if _, err := small.Messages(ctx, s.ID, MessagesOptions{Turns: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if small.history.hits.Load() != 0 || small.history.size != 0 {
		t.Fatalf("a 100-byte cache kept %d bytes", small.history.size)
	}
}

// Past its budget the cache lets the least recently read session go.
func TestHistoryCacheEvictsTheLeastRecent(t *testing.T) {
	one := []Message{{ID: "m", Seq: 1}}
	c := newHistoryCache(3 * entrySize(one))
	for _, id := range []ID{"a", "b", "c"} {
		c.put(id, 0, stamp{lastSeq: 1}, one)
	}
	if _, ok := c.get("a", 0, stamp{lastSeq: 1}); !ok {
		t.Fatal("a is not cached")
	}
	c.put("d", 0, stamp{lastSeq: 1}, one)
	for id, want := range map[ID]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := c.get(id, 0, stamp{lastSeq: 1}); ok != want {
			t.Errorf("%s cached: %v, want %v", id, ok, want)
		}
	}
	if c.size > c.budget {
		t.Fatalf("%d bytes cached over a budget of %d", c.size, c.budget)
	}
}

// TokenCount answers from the cache once the history is cached, and from
// the database otherwise; both say what the session's row says.
func TestTokenCount(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	st, plain := NewStore(db), NewStore(db, WithHistoryCache(0))
	s, _, err := st.Resolve(ctx, ChatKey("telegram", "1", "1", "a"), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		row, err := st.Session(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, store := range []*SQLStore{st, plain} {
			if n, err := store.TokenCount(ctx, s.ID); err != nil || n != row.Rollup.TokenCount {
				t.Fatalf("%s: token count %d %v, the row says %d", when, n, err, row.Rollup.TokenCount)
			}
		}
	}
	check("new session")
	for range 2 { // read twice, the history is cached
		if _, err := st.Messages(ctx, s.ID, MessagesOptions{Turns: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := st.Append(ctx, s.ID, Message{Role: RoleUser, Content: fmt.Sprint("a longer message, number ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := st.history.entries[s.ID]; !ok {
		t.Fatal("the history is not cached")
	}
	check("after appends")
	if _, err := st.TokenCount(ctx, "01a20000-0000-7000-8000-000000000000"); err == nil {
		t.Fatal("the token count of an unknown session")
	}
}

// Sessions read once each, more of them than the cache remembers, are
// never kept: a crowd of one-off reads can't push out the conversations
// that are going on.
func TestHistoryCacheKeepsOnlySessionsReadAgain(t *testing.T) {
	c := newHistoryCache(1 << 20)
	for i := range seenLimit + 10 {
		if c.admit(ID(fmt.Sprint("once", i))) {
			t.Fatalf("session %d admitted at its first read", i)
		}
	}
	if c.admit("once0") {
		t.Fatalf("a session read before the last %d was still remembered", seenLimit)
	}
	if !c.admit(ID(fmt.Sprint("once", seenLimit+9))) {
		t.Fatal("a session read just now is not admitted at its second read")
	}
	if len(c.seen) != seenLimit || len(c.order) != seenLimit {
		t.Fatalf("remembers %d sessions (%d in order), limit %d", len(c.seen), len(c.order), seenLimit)
	}
	// The ring goes round: the oldest still remembered goes next.
	for i := range seenLimit + 10 {
		if c.admit(ID(fmt.Sprint("again", i))) {
			t.Fatalf("session again%d admitted at its first read", i)
		}
	}
	if c.admit(ID(fmt.Sprint("again", 9))) || !c.admit(ID(fmt.Sprint("again", 11))) {
		t.Fatal("the ring forgot the wrong sessions")
	}
	if len(c.seen) != seenLimit || len(c.order) != seenLimit {
		t.Fatalf("remembers %d sessions (%d in order), limit %d", len(c.seen), len(c.order), seenLimit)
	}
}

// A conversation read again after a thousand others (parley bench's
// default crowd) is admitted at that read, so its turns from the third on
// are served from the cache.
func TestHistoryCacheAdmitsAConversationAfterManyOthers(t *testing.T) {
	c := newHistoryCache(1 << 20)
	const conversations = 1000
	for round := range 2 {
		for i := range conversations {
			if got := c.admit(ID(fmt.Sprint("conv", i))); got != (round == 1) {
				t.Fatalf("round %d, conversation %d: admitted %v", round, i, got)
			}
		}
	}
}

// A conversation's active session, which the store remembers and its own
// appends keep current, answers TokenCount without a read even when its
// history is not cached (more conversations than the history cache
// holds); a compaction or a rewind, which change the count, make the next
// answer a read again.
func TestTokenCountFromTheActiveSession(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	st := NewStore(db, WithHistoryCache(0))
	var reads atomic.Int64
	db.Observe(func(op dbutil.Op, _ time.Time, _ time.Duration) {
		if op == dbutil.OpRead {
			reads.Add(1)
		}
	})
	defer db.Observe(nil)
	s, _, err := st.Resolve(ctx, ChatKey("telegram", "1", "1", "a"), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var last Message
	for i := range 3 {
		if last, err = st.Append(ctx, s.ID, Message{Role: RoleUser, Content: fmt.Sprint("a longer message, number ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	row, err := st.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	before := reads.Load()
	if n, err := st.TokenCount(ctx, s.ID); err != nil || n != row.Rollup.TokenCount {
		t.Fatalf("token count %d %v, the row says %d", n, err, row.Rollup.TokenCount)
	}
	if n := reads.Load() - before; n != 0 {
		t.Fatalf("TokenCount read the database %d times, want the remembered session's count", n)
	}
	if _, err := st.Compact(ctx, s.ID, CompactInput{Through: last.Seq - 1, Expect: 2, Summary: "S"}); err != nil {
		t.Fatal(err)
	}
	row, err = st.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := st.TokenCount(ctx, s.ID); err != nil || n != row.Rollup.TokenCount {
		t.Fatalf("after compaction: token count %d %v, the row says %d", n, err, row.Rollup.TokenCount)
	}
}

// A read that began before an append of the store's, to a session it had
// no copy of, is not remembered: its state is already older.
func TestActiveCacheRefusesAReadOlderThanAnAppend(t *testing.T) {
	c := newActiveCache(4)
	s := Session{ID: "s1", Key: ChatKey("telegram", "c", "u", "a")}
	c.appended(s.ID, stamp{revision: 7, lastSeq: 3, count: 3}, 1, Usage{})
	c.put(s, 6)
	if _, _, ok := c.get(s.Key); ok {
		t.Fatal("a read at revision 6 was remembered after an append took the session to 7")
	}
	c.put(s, 7)
	if _, rev, ok := c.get(s.Key); !ok || rev != 7 {
		t.Fatalf("a read at revision 7: remembered %v at %d", ok, rev)
	}
}

// An append grows its entry's size by the message's, never by sizing the
// whole entry again, and the sizes stay what sizing it would give: with
// the window's trims, of a whole context and of a window of turns.
func TestHistoryCacheSizeFollowsAppends(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	st := NewStore(db)
	for _, turns := range []int{0, 2} {
		s, _, err := st.Resolve(ctx, ChatKey("telegram", fmt.Sprint(turns), "1", "a"), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // read twice, the history is cached
			if _, err := st.Messages(ctx, s.ID, MessagesOptions{Turns: turns}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 40 {
			m := Message{Role: RoleUser, Content: fmt.Sprint("message ", i), Parts: []Part{{Type: "text", Text: strings.Repeat("x", i)}}}
			if i%2 == 1 {
				m = Message{Role: RoleAssistant, Content: fmt.Sprint("reply ", i), Usage: &Usage{Input: 1}}
			}
			if _, err := st.Append(ctx, s.ID, m); err != nil {
				t.Fatal(err)
			}
			st.history.mu.Lock()
			el, ok := st.history.entries[s.ID]
			if !ok {
				st.history.mu.Unlock()
				t.Fatalf("turns %d: the history is not cached after append %d", turns, i)
			}
			e := el.Value.(*historyEntry)
			got, want := e.size, entrySize(e.msgs)
			total := 0
			for el := st.history.lru.Front(); el != nil; el = el.Next() {
				total += el.Value.(*historyEntry).size
			}
			cached := st.history.size
			st.history.mu.Unlock()
			if got != want || cached != total {
				t.Fatalf("turns %d, append %d: entry size %d, sizing it gives %d; cache size %d, its entries' %d", turns, i, got, want, cached, total)
			}
		}
	}
}

// A message's metadata is a JSON object or nothing; what is refused says
// why.
func TestCheckMetadata(t *testing.T) {
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{"", true}, {"null", true}, {" null ", true}, {`{}`, true}, {` {"a": [1, {"b": null}]} `, true},
		{`{"a":1,"a":2}`, true}, {`[]`, false}, {`"x"`, false}, {`1`, false}, {`{`, false}, {`{"a":}`, false},
		{`{} {}`, false}, {`{}x`, false}, {`true`, false},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			err := checkMetadata(json.RawMessage(tc.raw))
			if (err == nil) != tc.ok {
				t.Fatalf("checkMetadata(%q) = %v, want ok %v", tc.raw, err, tc.ok)
			}
			var obj map[string]json.RawMessage
			if decodeErr := json.Unmarshal([]byte(tc.raw), &obj); tc.raw != "" && (decodeErr == nil) != tc.ok {
				t.Fatalf("%q: checked ok %v, but decoding it gives %v", tc.raw, tc.ok, decodeErr)
			}
			if err != nil && !strings.Contains(err.Error(), "metadata must be a JSON object") {
				t.Fatalf("refused as %q", err)
			}
		})
	}
}
