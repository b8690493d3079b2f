package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// memberPlacement places lanes among replicas with a cluster member, as
// the daemon does.
type memberPlacement struct{ m *cluster.Member }

func (p memberPlacement) Place(ctx context.Context, lane string) (hold, holder string, here bool, err error) {
	hold = cluster.LaneHold(lane)
	holder, err = p.m.Claim(ctx, hold)
	return hold, holder, err == nil && holder == p.m.ID(), err
}

// A replica died in the middle of a session's turn, with a newer message
// of the session queued behind it; a third message then reaches a
// survivor before anyone took the dead replica's messages over. The
// survivor runs the session's messages in the order the dead replica
// would have: the interrupted one, the queued one, then the new one,
// however the takeover and the new message meet (PostgreSQL only: it is
// the replicas' engine).
func TestFailoverRunsTheDeadReplicasMessagesFirst(t *testing.T) {
	ctx := context.Background()
	db, dead := dbtest.TwoHandles(t, "postgres")
	registerReplica(t, dead, "d")
	key := gateway.SessionKey(msg("1", ""), "default")
	// d accepted two messages and began the first's turn (its user
	// message is stored), holding the session's lane.
	dstore := gateway.NewStore(dead, nil, gateway.Owner("d"), gateway.Cluster())
	first, _, err := dstore.Accept(ctx, msg("1", "interrupted"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dstore.Accept(ctx, msg("2", "queued")); err != nil {
		t.Fatal(err)
	}
	dsess := sessions.NewStore(dead)
	s, _, err := dsess.Resolve(ctx, key, sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dsess.Append(ctx, s.ID, sessions.Message{ID: sessions.MessageID(first), Role: sessions.RoleUser, Content: "interrupted"}); err != nil {
		t.Fatal(err)
	}
	if _, err := dead.Write().ExecContext(ctx, `INSERT INTO holds (name, instance, since) VALUES ($1, 'd', 0)`, cluster.LaneHold(gateway.LaneKey(key))); err != nil {
		t.Fatal(err)
	}
	fenceReplica(t, dead, "d")

	m := cluster.New(db, cluster.Options{Name: "b", Lease: time.Minute, Heartbeat: time.Second})
	if err := m.Join(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Leave(context.Background()) })
	var mu sync.Mutex
	var ran []string
	r := newRig(t, db, func(ctx context.Context, in gateway.TurnInput) (string, error) {
		mu.Lock()
		for _, msg := range in.Messages {
			ran = append(ran, msg.Text)
		}
		mu.Unlock()
		return echoRun(ctx, in)
	}, func(o *gateway.Options) {
		o.Store = gateway.NewStore(db, nil, gateway.Owner(m.ID()), gateway.Cluster())
		o.Placement = memberPlacement{m}
	})
	r.deliver(msg("3", "new"))
	// The survivor's heartbeat takes the dead replica's messages over.
	if _, err := r.gw.TakeOver(r.ctx); err != nil {
		t.Fatal(err)
	}
	got := r.sent(3)
	want := []string{"echo: interrupted", "echo: queued", "echo: new"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("replies %q (turns ran %q); want %q: the dead replica's messages first, in its order", got, ran, want)
	}
	waitUnfinished(t, r.store, 0)
}
