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

// sameActive fails the test, at step, unless st resolves key's active
// session as plain, which remembers none, reads it.
func sameActive(t *testing.T, step string, st, plain *sessions.SQLStore, key sessions.Key) {
	t.Helper()
	ctx := context.Background()
	got, err := st.Active(ctx, key)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	want, err := plain.Active(ctx, key)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if g, w := sessionJSON(t, got), sessionJSON(t, want); g != w {
		t.Fatalf("%s: the remembered session\n got %s\nwant %s", step, g, w)
	}
}

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
				randomActive(t, db, size, uint64(size), false)
			})
		}
		// One store making every change, as parley run on a SQLite file
		// it holds: no read of a remembered session at all.
		if db.Dialect == dbutil.SQLite {
			t.Run("sole writer", func(t *testing.T) {
				held := open(t)
				held.HoldsFile()
				randomActive(t, held, sessions.DefaultActiveCache, 3, true)
			})
		}
	})
}

func randomActive(t *testing.T, db *dbutil.DB, size int, seed uint64, sole bool) {
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
	if sole {
		stores = stores[:1:1]
		stores[0] = sessions.NewStore(db, sessions.WithActiveCache(size), sessions.WithClock(now), sessions.WithSoleWriter())
	}
	policy := sessions.Policy{IdleTimeout: 90 * time.Minute}
	var keys []sessions.Key
	for i := range 4 {
		keys = append(keys, sessions.ChatKey("telegram", fmt.Sprint("a", seed, i), "u", "a"))
	}
	for op := range 500 {
		st := stores[0]
		if rng.IntN(4) == 0 && len(stores) > 1 {
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
		if sole {
			// Misses count the reads that found a remembered session
			// changed: a sole writer makes none.
			if hits == 0 || misses != 0 {
				t.Errorf("sole writer: %d hits and %d misses, want hits and no miss", hits, misses)
			}
			continue
		}
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

// Whatever changes a session's row, parley or not, a store that remembers
// the session sees it: the database bumps the revision of any change that
// doesn't bump it itself.
func TestActiveCacheSeesEveryChangeToTheRow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		st := sessions.NewStore(db)
		plain := sessions.NewStore(db, sessions.WithActiveCache(0))
		parentKey := sessions.ChatKey("telegram", "parent", "u", "a")
		childKey := sessions.ChatKey("telegram", "child", "u", "a")
		parent, err := st.Create(ctx, parentKey, sessions.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(ctx, childKey, sessions.CreateOptions{ParentID: parent.ID}); err != nil {
			t.Fatal(err)
		}
		same := func(step string) {
			t.Helper()
			sameActive(t, step, st, plain, childKey)
		}
		same("created")
		// Deleting the parent sets the child's parent_id to NULL (the
		// foreign key's ON DELETE SET NULL), a change no UPDATE of
		// parley's makes.
		if err := st.Delete(ctx, parent.ID); err != nil {
			t.Fatal(err)
		}
		same("parent deleted")
		// An update by hand, or by a replica of an older release that
		// knows nothing of revisions.
		if _, err := db.Write().ExecContext(ctx, `UPDATE sessions SET title = 'set by hand' WHERE surface_id = 'child'`); err != nil {
			t.Fatal(err)
		}
		same("updated by hand")
		if got, _ := st.Active(ctx, childKey); got.Title != "set by hand" {
			t.Fatalf("title %q after the update by hand", got.Title)
		}
	})
}

// An append through the store carries its copy forward only from the
// revision just before: a rename elsewhere, then our append with no read
// in between, is still seen.
func TestActiveCacheAppendAfterAChangeElsewhere(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		st, other := sessions.NewStore(db), sessions.NewStore(db)
		key := sessions.ChatKey("telegram", "rename", "u", "a")
		s, _, err := st.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Rename(ctx, s.ID, "renamed elsewhere"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "x"}); err != nil {
			t.Fatal(err)
		}
		got, _, err := st.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Title != "renamed elsewhere" || got.MessageCount != 1 {
			t.Fatalf("resolved title %q and %d messages; want the rename and 1", got.Title, got.MessageCount)
		}
	})
}

// A session moved to another agent leaves its old key: that key resolves
// a new session, the new key the moved one. What a caller does to a
// resolved session's metadata is its own.
func TestActiveCacheKeysAndCopies(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		st := sessions.NewStore(db)
		key := sessions.ChatKey("telegram", "move", "u", "a")
		s, _, err := st.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := st.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if hits, _ := st.ActiveCacheStats(); hits != 1 || again.ID != s.ID {
			t.Fatalf("resolving again: %d hits, session %s; want 1 hit and %s", hits, again.ID, s.ID)
		}
		again.Metadata[0] = 'X'
		if got, err := st.Active(ctx, key); err != nil || string(got.Metadata) != "{}" {
			t.Fatalf("after a caller changed its copy, metadata %q (%v)", got.Metadata, err)
		}
		agent := "b"
		if _, err := st.Update(ctx, s.ID, sessions.Update{AgentID: &agent}); err != nil {
			t.Fatal(err)
		}
		fresh, created, err := st.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if !created || fresh.ID == s.ID {
			t.Fatalf("the old key resolved %s (created %v); want a new session, not the moved %s", fresh.ID, created, s.ID)
		}
		moved, err := st.Active(ctx, sessions.ChatKey("telegram", "move", "u", "b"))
		if err != nil || moved.ID != s.ID {
			t.Fatalf("the new key's active session: %s (%v); want %s", moved.ID, err, s.ID)
		}
	})
}

// On PostgreSQL a resolve waits on the network and on locks, and gives up
// at its caller's deadline.
func TestResolveHonoursItsDeadlineOnPostgres(t *testing.T) {
	dbtest.RequirePostgres(t)
	ctx := context.Background()
	db := dbtest.Postgres(t)
	st := sessions.NewStore(db)
	key := sessions.ChatKey("telegram", "locked", "u", "a")
	if _, _, err := st.Resolve(ctx, key, sessions.Policy{}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Writer().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, _, err := st.Resolve(tctx, key, sessions.Policy{}); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("resolve with the table locked: %v; want its deadline exceeded", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("resolve waited on the lock past its deadline")
	}
}

// A store that makes every change to its file's sessions resolves a
// remembered session with no read at all, and whatever it does to the
// session, it resolves what the database holds.
func TestSoleWriterResolvesWithoutReading(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	db.HoldsFile()
	st := sessions.NewStore(db, sessions.WithSoleWriter())
	plain := sessions.NewStore(db, sessions.WithActiveCache(0))
	key := sessions.ChatKey("telegram", "sole", "u", "a")
	same := func(step string, k sessions.Key) {
		t.Helper()
		sameActive(t, step, st, plain, k)
	}
	s, _, err := st.Resolve(ctx, key, sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	reads := dbtest.CountReads(db)
	for range 5 {
		if _, _, err := st.Resolve(ctx, key, sessions.Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.Load(); n != 0 {
		t.Fatalf("%d reads resolving a remembered session five times, want none", n)
	}
	db.Observe(nil)
	same("appended", key)

	if err := st.Rename(ctx, s.ID, "renamed"); err != nil {
		t.Fatal(err)
	}
	same("renamed", key)
	title := "updated"
	if _, err := st.Update(ctx, s.ID, sessions.Update{Title: &title, Metadata: json.RawMessage(`{"k":"v"}`)}); err != nil {
		t.Fatal(err)
	}
	same("updated", key)
	if _, err := st.Reset(ctx, key); err != nil {
		t.Fatal(err)
	}
	same("reset", key)
	cur, err := st.Active(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Archive(ctx, cur.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Resolve(ctx, key, sessions.Policy{}); err != nil {
		t.Fatal(err)
	}
	same("archived, then resolved", key)

	// A child remembered before its parent is deleted loses its parent_id
	// with it (the foreign key's ON DELETE SET NULL).
	parent, err := st.Create(ctx, sessions.ChatKey("telegram", "sole-parent", "u", "a"), sessions.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	childKey := sessions.ChatKey("telegram", "sole-child", "u", "a")
	if _, err := st.Create(ctx, childKey, sessions.CreateOptions{ParentID: parent.ID}); err != nil {
		t.Fatal(err)
	}
	same("child created", childKey)
	if err := st.Delete(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	same("parent deleted", childKey)
}

// Where another process may write (PostgreSQL, which replicas share, or
// a SQLite file this process doesn't hold), the option changes nothing: a
// remembered session's revision is read every time.
func TestSoleWriterReadsWhereOthersMayWrite(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		db.HoldsFile() // says nothing on PostgreSQL
		if db.Dialect == dbutil.SQLite {
			db = open(t) // a file not held
		}
		st := sessions.NewStore(db, sessions.WithSoleWriter())
		key := sessions.ChatKey("telegram", "sole-shared", "u", "a")
		if _, _, err := st.Resolve(ctx, key, sessions.Policy{}); err != nil {
			t.Fatal(err)
		}
		reads := dbtest.CountReads(db)
		if _, _, err := st.Resolve(ctx, key, sessions.Policy{}); err != nil {
			t.Fatal(err)
		}
		if n := reads.Load(); n == 0 {
			t.Fatal("no read resolving a session another process may have changed")
		}
	})
}
