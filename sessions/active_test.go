package sessions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

func sessionJSON(t *testing.T, s sessions.Session) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Whatever happens to a conversation's session, and whichever store
// (process) does it, a store that remembers active sessions resolves
// exactly what one that doesn't resolves.
func TestActiveCacheResolvesWhatTheDatabaseHolds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		for _, size := range []int{sessions.DefaultActiveCache, 2} {
			t.Run(fmt.Sprint("size ", size), func(t *testing.T) {
				randomActive(t, db, size, uint64(size))
			})
		}
	})
}

func randomActive(t *testing.T, db *dbutil.DB, size int, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 11))
	clock := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	plain := sessions.NewStore(db, sessions.WithActiveCache(0), sessions.WithClock(now))
	// Two caching stores on one database: two replicas, or a daemon and a
	// command run beside it.
	stores := []*sessions.SQLStore{
		sessions.NewStore(db, sessions.WithActiveCache(size), sessions.WithClock(now)),
		sessions.NewStore(db, sessions.WithActiveCache(size), sessions.WithClock(now)),
	}
	policy := sessions.Policy{IdleTimeout: 90 * time.Minute}
	var keys []sessions.Key
	for i := range 4 {
		keys = append(keys, sessions.ChatKey("telegram", fmt.Sprint("a", seed, i), "u", "a"))
	}
	for op := range 500 {
		st := stores[0]
		if rng.IntN(4) == 0 {
			st = stores[1]
		}
		key := keys[rng.IntN(len(keys))]
		clock = clock.Add(time.Duration(rng.IntN(5)) * time.Millisecond)
		if rng.IntN(40) == 0 {
			clock = clock.Add(2 * time.Hour) // every session goes idle
		}
		cur, _, err := st.Resolve(ctx, key, policy)
		if err != nil {
			t.Fatalf("op %d: resolve: %v", op, err)
		}
		what := "append"
		switch n := rng.IntN(100); {
		case n < 70:
			m := sessions.Message{Role: sessions.RoleUser, Content: fmt.Sprint("user ", op)}
			if rng.IntN(2) == 0 {
				m.Role, m.Content = sessions.RoleAssistant, fmt.Sprint("assistant ", op)
				m.Usage = &sessions.Usage{Input: 3, Output: 4, Reasoning: 1, CacheRead: 2, CacheWrite: 1, CostUSD: 0.1}
			}
			if _, err := st.Append(ctx, cur.ID, m); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		case n < 76:
			what = "rename"
			if err := st.Rename(ctx, cur.ID, fmt.Sprint("title ", op)); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		case n < 82:
			what = "update"
			model := fmt.Sprint("m", op)
			meta := json.RawMessage(fmt.Sprintf(`{"n":%d}`, op))
			if _, err := st.Update(ctx, cur.ID, sessions.Update{Model: &model, Metadata: meta}); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		case n < 88:
			what = "reset"
			if _, err := st.Reset(ctx, key); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		case n < 92:
			what = "delete"
			if err := st.Delete(ctx, cur.ID); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		default:
			what = "compact"
			live, err := plain.Messages(ctx, cur.ID, sessions.MessagesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(live) < 4 {
				continue
			}
			in := sessions.CompactInput{Through: live[1].Seq, Expect: 2, Summary: fmt.Sprint("summary ", op)}
			if _, err := st.Compact(ctx, cur.ID, in); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		}
		for _, k := range keys {
			want, wantErr := plain.Active(ctx, k)
			for i, reader := range stores {
				got, err := reader.Active(ctx, k)
				if !errors.Is(err, wantErr) && (err == nil || wantErr == nil || !errors.Is(err, sessions.ErrNotFound) || !errors.Is(wantErr, sessions.ErrNotFound)) {
					t.Fatalf("op %d (%s): store %d's active session of %s: error %v, want %v", op, what, i, k, err, wantErr)
				}
				if g, w := sessionJSON(t, got), sessionJSON(t, want); g != w {
					t.Fatalf("op %d (%s): store %d's active session of %s:\n got %s\nwant %s", op, what, i, k, g, w)
				}
			}
		}
	}
	for i, st := range stores {
		hits, misses := st.ActiveCacheStats()
		if hits == 0 || misses == 0 {
			t.Errorf("store %d: %d hits and %d misses; the operations should have made both", i, hits, misses)
		}
	}
}

// Appends through the store keep its copy current: resolving the session
// after them reads only its revision, and a change made elsewhere is seen.
func TestActiveCacheFollowsOwnAppends(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		ctx := context.Background()
		st := sessions.NewStore(db)
		other := sessions.NewStore(db)
		key := sessions.ChatKey("telegram", "follow", "u", "a")
		s, _, err := st.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: fmt.Sprint("m", i),
				Usage: &sessions.Usage{Input: 10, Output: 5, CostUSD: 0.01}}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.Resolve(ctx, key, sessions.Policy{}); err != nil {
				t.Fatal(err)
			}
		}
		hits, misses := st.ActiveCacheStats()
		// The first resolve after creating reads in full; each after an
		// append finds the copy current.
		if hits != 5 || misses != 0 {
			t.Fatalf("after 5 appends and resolves: %d hits, %d misses; want 5 and 0", hits, misses)
		}
		got, _, err := st.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if got.MessageCount != 5 || got.Rollup.PromptTokens != 50 || got.Rollup.CompletionTokens != 25 {
			t.Fatalf("resolved %d messages, %d prompt and %d completion tokens; want 5, 50, 25",
				got.MessageCount, got.Rollup.PromptTokens, got.Rollup.CompletionTokens)
		}
		if err := other.Rename(ctx, s.ID, "renamed elsewhere"); err != nil {
			t.Fatal(err)
		}
		got, _, err = st.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Title != "renamed elsewhere" {
			t.Fatalf("after a rename by another store, resolved title %q", got.Title)
		}
		if _, misses := st.ActiveCacheStats(); misses != 1 {
			t.Fatalf("the rename elsewhere made %d misses, want 1", misses)
		}
	})
}
