package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

// A daemon hands memory back once a busy spell ends: not while it is busy,
// not when it has been idle all along, and once per spell.
func TestSettlesAfterABusySpell(t *testing.T) {
	old := settleEvery
	settleEvery = 100 * time.Millisecond
	t.Cleanup(func() { settleEvery = old })
	d, _, stop := testDaemon(t, "", apiOnly)
	defer stop()
	ctx := context.Background()

	time.Sleep(trimAfter + 6*settleEvery)
	if n := d.settlings.Load(); n != 0 {
		t.Fatalf("settled %d times without a busy spell", n)
	}
	write := func() {
		if err := d.db.Tx(ctx, func(q dbutil.Querier) error {
			_, err := q.ExecContext(ctx, "SELECT 1")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A conversation's history, which the store keeps for its next turn.
	sess, _, err := d.sessions.Resolve(ctx, sessions.ChatKey("api", "settle", "u", "a"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := d.sessions.Append(ctx, sess.ID, sessions.Message{Role: sessions.RoleUser, Content: "hello"}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.sessions.Messages(ctx, sess.ID, sessions.MessagesOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if d.sessions.CachedHistories() == 0 {
		t.Fatal("the store kept no history to release")
	}
	// Busy: writes in every window, more than a spell's worth.
	busyUntil := time.Now().Add(10 * settleEvery)
	for n := 0; n < 2*busySpell || time.Now().Before(busyUntil); n++ {
		write()
		if s := d.settlings.Load(); s != 0 {
			t.Fatalf("settled while busy (after %d writes)", n)
		}
	}
	deadline := time.Now().Add(20 * settleEvery)
	for d.settlings.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("did not settle after the busy spell ended")
		}
		time.Sleep(settleEvery / 5)
	}
	if n := d.sessions.CachedHistories(); n != 0 {
		t.Fatalf("still %d histories cached after settling", n)
	}
	time.Sleep(6 * settleEvery)
	if n := d.settlings.Load(); n != 1 {
		t.Fatalf("settled %d times after one spell", n)
	}
}
