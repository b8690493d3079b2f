package sessions_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// Archive leaves a session readable; PruneArchived deletes only archived
// sessions archived before the cutoff, with their messages, and never an
// active one however old.
func TestArchiveAndPrune(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		var mu sync.Mutex
		now := time.UnixMilli(1_700_000_000_000)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
		st := sessions.NewStore(db, sessions.WithClock(clock))
		mk := func(chat string, messages int) sessions.Session {
			t.Helper()
			s, _, err := st.Resolve(ctx, sessions.CronKey(chat, clock(), "main"), sessions.Policy{})
			if err != nil {
				t.Fatal(err)
			}
			for range messages {
				if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "run"}); err != nil {
					t.Fatal(err)
				}
			}
			return s
		}
		old, idle := mk("old", 3), mk("idle", 2)
		if ok, err := st.Archive(ctx, old.ID, sessions.ReasonFinished); err != nil || !ok {
			t.Fatalf("archive: %v %v", ok, err)
		}
		if ok, err := st.Archive(ctx, old.ID, sessions.ReasonFinished); err != nil || ok {
			t.Fatalf("archive again: %v %v, want false", ok, err)
		}
		if got, err := st.Session(ctx, old.ID); err != nil || got.Status != sessions.StatusArchived || got.ResetReason != sessions.ReasonFinished {
			t.Fatalf("archived session reads %+v %v", got, err)
		}
		advance(40 * 24 * time.Hour)
		recent := mk("recent", 1)
		if _, err := st.Archive(ctx, recent.ID, sessions.ReasonFinished); err != nil {
			t.Fatal(err)
		}
		res, err := st.PruneArchived(ctx, clock().Add(-30*24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if res.Sessions != 1 || res.Messages != 3 {
			t.Fatalf("pruned %+v, want 1 session and its 3 messages", res)
		}
		if _, err := st.Session(ctx, old.ID); err == nil {
			t.Fatal("the old archived session is still there")
		}
		var left int
		if err := db.Reader().QueryRow(`SELECT count(*) FROM messages WHERE session_id = $1`, string(old.ID)).Scan(&left); err != nil || left != 0 {
			t.Fatalf("%d of its messages left (%v)", left, err)
		}
		for _, s := range []sessions.Session{idle, recent} {
			if _, err := st.Session(ctx, s.ID); err != nil {
				t.Fatalf("session %s (%s) was pruned: %v", s.ID, s.Key, err)
			}
		}
		// Everything archived goes with a cutoff of now; the active one stays.
		if res, err := st.PruneArchived(ctx, clock().Add(time.Millisecond)); err != nil || res.Sessions != 1 {
			t.Fatalf("second prune %+v %v", res, err)
		}
		if _, err := st.Session(ctx, idle.ID); err != nil {
			t.Fatalf("the active session was pruned: %v", err)
		}
	})
}
