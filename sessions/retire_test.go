package sessions_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
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

// Unarchive brings an archived session back as its conversation's active
// one, with its history, once; while the conversation has another active
// session it refuses, changing nothing.
func TestUnarchive(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		var events []sessions.Lifecycle
		st := sessions.NewStore(open(t), sessions.WithLifecycleHook(func(_ context.Context, _ dbutil.Querier, l sessions.Lifecycle) error {
			events = append(events, l)
			return nil
		}))
		key := sessions.CLIKey("ann", "notes")
		s, _, err := st.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "keep this"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Archive(ctx, s.ID, "by hand"); err != nil {
			t.Fatal(err)
		}
		back, err := st.Unarchive(ctx, s.ID)
		if err != nil || back.Status != sessions.StatusActive || !back.ArchivedAt.IsZero() || back.ResetReason != "" {
			t.Fatalf("Unarchive = %+v, %v", back, err)
		}
		if got, err := st.Active(ctx, key); err != nil || got.ID != s.ID || got.MessageCount != 1 {
			t.Fatalf("the conversation's active session is %+v, %v; want the unarchived one with its message", got, err)
		}
		if last := events[len(events)-1]; last.Type != sessions.EventSessionUnarchived || last.Session != s.ID || last.Key != key {
			t.Fatalf("lifecycle event %+v, want session.unarchived with its key", last)
		}
		if again, err := st.Unarchive(ctx, s.ID); err != nil || again.ID != s.ID || again.Status != sessions.StatusActive {
			t.Fatalf("unarchiving an active session: %+v, %v", again, err)
		}

		// Archived again, and a newer session began: it stays archived.
		if _, err := st.Archive(ctx, s.ID, "by hand"); err != nil {
			t.Fatal(err)
		}
		newer, _, err := st.Resolve(ctx, key, sessions.Policy{})
		if err != nil || newer.ID == s.ID {
			t.Fatalf("a new session: %+v, %v", newer, err)
		}
		if _, err := st.Unarchive(ctx, s.ID); !errors.Is(err, sessions.ErrConflict) || !strings.Contains(err.Error(), string(newer.ID)) {
			t.Fatalf("unarchive beside an active session: %v; want a conflict naming it", err)
		}
		if got, _ := st.Session(ctx, s.ID); got.Status != sessions.StatusArchived {
			t.Fatalf("a refused unarchive changed the session: %+v", got)
		}
		if _, err := st.Unarchive(ctx, "0195f1f0-0000-7000-8000-000000000000"); !errors.Is(err, sessions.ErrNotFound) {
			t.Fatalf("unarchive an unknown session: %v", err)
		}
	})
}
