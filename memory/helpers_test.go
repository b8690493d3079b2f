package memory

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var (
	aliceKey = sessions.ChatKey("telegram", "100", "alice", "default")
	bobKey   = sessions.ChatKey("telegram", "200", "bob", "default")
	alice    = ScopeOf(aliceKey)
	bob      = ScopeOf(bobKey)
)

// builtinStore opens the built-in index on db and a store on it.
func builtinStore(t testing.TB, db *dbutil.DB, c *clock) *Store {
	t.Helper()
	idx, err := NewBuiltin(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(db, idx, WithClock(c.Now))
}

func mustWrite(t testing.TB, s *Store, scope Scope, content string, tags ...string) Item {
	t.Helper()
	it, err := s.Write(context.Background(), scope, Memory{Content: content, Tags: tags, SessionID: "s-" + sessions.ID(scope.User)})
	if err != nil {
		t.Fatalf("write %q: %v", content, err)
	}
	return it
}

func mustSearch(t testing.TB, s *Store, scope Scope, q string, limit int) []Result {
	t.Helper()
	res, err := s.Search(context.Background(), scope, q, limit)
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	return res
}

func contents(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Content
	}
	return out
}

func count(t testing.TB, db *dbutil.DB, table string) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
