package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// A replica paused while it hands a message to another (inside Forward's
// transaction) never holds up the other's heartbeat: the healthy
// replica renews its lease at once, so it is not fenced with the paused
// one.
func TestHeartbeatDoesNotWaitForAPausedHandover(t *testing.T) {
	ctx := context.Background()
	dbH, dbF := dbtest.TwoHandles(t, "postgres")
	h := cluster.New(dbH, cluster.Options{Name: "holder", Lease: 5 * time.Second, Heartbeat: time.Hour})
	f := cluster.New(dbF, cluster.Options{Name: "forwarder", Lease: time.Hour, Heartbeat: time.Hour})
	for _, m := range []*cluster.Member{h, f} {
		if err := m.Join(ctx); err != nil {
			t.Fatal(err)
		}
	}
	store := NewStore(dbF, nil, Owner(f.ID()), Cluster())
	id, _, err := store.Accept(ctx, adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "1", UserID: "1", MessageID: "1", Text: "hi", Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	paused, release := make(chan struct{}), make(chan struct{})
	afterForwardCheck = func() { close(paused); <-release }
	t.Cleanup(func() { afterForwardCheck = nil })
	forwarded := make(chan error, 1)
	go func() {
		_, err := store.Forward(ctx, id, "lane:x", h.ID())
		forwarded <- err
	}()
	<-paused
	beatCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	err = h.Heartbeat(beatCtx)
	took := time.Since(start)
	close(release)
	if err != nil || took > time.Second {
		t.Fatalf("the holder's heartbeat during a paused handover to it: %v after %s; want through at once", err, took)
	}
	if err := <-forwarded; err != nil {
		t.Fatalf("the handover, resumed: %v", err)
	}
}
