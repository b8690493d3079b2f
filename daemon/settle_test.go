package daemon

import (
	"context"
	"encoding/json"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/internal/trim"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
	"golang.org/x/sys/unix"
)

// A daemon hands memory back once a busy spell ends: not while it is busy,
// not again while it stays idle, and once per spell. Its start-up counts as
// one.
func TestSettlesAfterABusySpell(t *testing.T) {
	old := trim.SettleEvery
	trim.SettleEvery = 100 * time.Millisecond
	t.Cleanup(func() { trim.SettleEvery = old })
	d, _, stop := testDaemon(t, "http:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	ctx := context.Background()

	time.Sleep(trim.TrimAfter + 6*trim.SettleEvery)
	if n := d.settler.Settlings.Load(); n != 1 {
		t.Fatalf("settled %d times after start-up, want once", n)
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
	// And a finished run's events, which the API keeps for its streams.
	d.events.Start(string(sess.ID), "run-1")
	d.events.Append("run-1", api.Event{SessionID: string(sess.ID), Type: api.TypeTurnFinished, Data: json.RawMessage(`{}`)})
	if !d.events.Held(string(sess.ID), "run-1") {
		t.Fatal("the event log kept no run to release")
	}
	// And the prompts the echo model remembers.
	if _, err := d.offline.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}}, nil); err != nil {
		t.Fatal(err)
	}
	// Busy: writes in every window, more than a spell's worth.
	busyUntil := time.Now().Add(10 * trim.SettleEvery)
	for n := 0; n < 2*trim.BusySpell || time.Now().Before(busyUntil); n++ {
		write()
		if s := d.settler.Settlings.Load(); s != 1 {
			t.Fatalf("settled while busy (after %d writes)", n)
		}
	}
	deadline := time.Now().Add(20 * trim.SettleEvery)
	for d.settler.Settlings.Load() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("did not settle after the busy spell ended")
		}
		time.Sleep(trim.SettleEvery / 5)
	}
	if n := d.sessions.CachedHistories(); n != 0 {
		t.Fatalf("still %d histories cached after settling", n)
	}
	if d.events.Held(string(sess.ID), "run-1") {
		t.Fatal("the finished run's events are still held after settling")
	}
	if n := len(d.offline.Requests()); n != 0 {
		t.Fatalf("the echo model still remembers %d prompts after settling", n)
	}
	time.Sleep(6 * trim.SettleEvery)
	if n := d.settler.Settlings.Load(); n != 2 {
		t.Fatalf("settled %d times after start-up and one spell", n)
	}
}

// A quiet daemon unmaps again what came back since it last did, once the
// pages grow past trim.Remapped, and at most every trim.RetrimEvery: not while
// nothing grows.
func TestRetrimsWhatAQuietDaemonMapsAgain(t *testing.T) {
	if trim.FileResident() == 0 {
		t.Skip("no /proc/self/statm here")
	}
	// Growth is counted from 32 MB here: a retrim unmaps all of the
	// binary, and on a loaded machine (CI, with -race, whose binary is
	// larger) the daemon's own loops mapped 2 MB, once over 6 MB, and
	// once, with other test binaries running beside it, over 16 MB of it
	// back within the test's 600 ms, which is growth too, and was unmapped
	// again. The test maps 48 MB, well past it.
	oldSettle, oldRetrim, oldRemapped := trim.SettleEvery, trim.RetrimEvery, trim.Remapped
	trim.SettleEvery, trim.RetrimEvery, trim.Remapped = 50*time.Millisecond, 200*time.Millisecond, 32<<20
	t.Cleanup(func() { trim.SettleEvery, trim.RetrimEvery, trim.Remapped = oldSettle, oldRetrim, oldRemapped })
	d, _, stop := testDaemon(t, "", apiOnly)
	defer stop()

	// Start-up settles first (its trim is what growth is measured from).
	waitCount(t, &d.settler.Settlings, "start-up never settled")
	time.Sleep(2 * trim.RetrimEvery)
	if n := d.settler.Retrims.Load(); n != 0 {
		t.Fatalf("unmapped again %d times with nothing mapped", n)
	}
	// Map 48 MB of a file and touch it: file-backed pages, as the binary's
	// are when a path runs again.
	f, err := os.CreateTemp(t.TempDir(), "mapped")
	if err != nil {
		t.Fatal(err)
	}
	const size = 48 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	var sum byte
	for i := 0; i < size; i += os.Getpagesize() {
		sum += m[i]
	}
	if sum != 0 {
		t.Fatal("a new file reads as zeros")
	}
	waitCount(t, &d.settler.Retrims, "did not unmap again after 48 MB came back")
	time.Sleep(3 * trim.RetrimEvery)
	if n := d.settler.Retrims.Load(); n != 1 {
		t.Fatalf("unmapped again %d times for one growth", n)
	}
}

// waitCount waits until n is above 0, failing with what after 5 s.
func waitCount(t *testing.T, n *atomic.Int64, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(trim.SettleEvery)
	}
}
