package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/turns"
)

// A replica cut off from PostgreSQL stops polling Telegram once its
// lease lapses, before the others can fence it and poll the bot
// themselves, and never polls again: not while it is cut off, and not
// when the database returns and it finds itself fenced (each such poll
// would cut the real poller's off with a 409).
func TestFencedReplicaStopsItsChannelsFirst(t *testing.T) {
	dbtest.RequirePostgres(t)
	if testing.Short() {
		t.Skip("cuts the database for seconds")
	}
	ctx := context.Background()
	proxy := dbtest.NewProxy(t, "127.0.0.1:5432")
	pgURL := dbtest.PostgresURL(t)
	tg := telegramtest.NewServer()
	defer tg.Close()
	path := filepath.Join(t.TempDir(), "parley.yaml")
	yaml := "database:\n  url: \"" + proxy.Via(t, pgURL) + "\"\n" +
		"gateway:\n  debounce: 0s\n  replica_lease: 1s\n  replica_heartbeat: 200ms\n" +
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n" + indentYAML(tg.ConfigYAML(), "    ")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := build(ctx, cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.adapters = configuredChannels(t)(d)
	d.adapters[turns.APIAdapterID] = turns.APIChannel{} // as parley run has it
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ran := make(chan error, 1)
	go func() { ran <- d.Run(runCtx) }()
	waitUntil(t, 10*time.Second, "the replica polls the bot", func() bool { return len(tg.Polls()) > 0 })
	tg.InjectText(1, 1, "before the cut")
	waitUntil(t, 10*time.Second, "the message is answered", func() bool { return tg.SentCount() == 1 })

	// A peer, on a connection of its own, fences the replica once its
	// heartbeat lapses.
	peerDB, err := dbutil.Open(ctx, dbutil.Options{URL: pgURL})
	if err != nil {
		t.Fatal(err)
	}
	defer peerDB.Close()
	peer := cluster.New(peerDB, cluster.Options{Name: "peer", Lease: time.Second, Heartbeat: 200 * time.Millisecond})
	if err := peer.Join(ctx); err != nil {
		t.Fatal(err)
	}
	peerCtx, stopPeer := context.WithCancel(ctx)
	peerDone := make(chan struct{})
	go func() { defer close(peerDone); _ = peer.Run(peerCtx, nil) }()
	defer func() { stopPeer(); <-peerDone }()

	proxy.Cut()
	// A message while it is cut off: fetched, and not stored.
	tg.InjectText(1, 1, "during the cut")
	id := d.replicas.ID("")
	waitUntil(t, 10*time.Second, "the peer fences the replica", func() bool {
		var fenced bool
		err := peerDB.Read().QueryRowContext(ctx, `SELECT fenced_at IS NOT NULL FROM replicas WHERE instance = $1`, id).Scan(&fenced)
		return err == nil && fenced
	})
	fencedAt := len(tg.Polls())
	tg.InjectText(1, 1, "after the fence") // ends a poll in flight, if any
	time.Sleep(time.Second)
	proxy.Restore()
	select {
	case err := <-ran:
		if !errors.Is(err, cluster.ErrFenced) {
			t.Fatalf("the fenced replica's Run: %v; want ErrFenced", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the fenced replica went on after the database returned")
	}
	if n := len(tg.Polls()); n != fencedAt {
		t.Fatalf("the replica polled the bot %d times after it was fenced; want none (each cuts off the poller that took it over)", n-fencedAt)
	}
}

// waitUntil waits, up to within, for ok.
func waitUntil(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
