package gateway_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
)

// registerReplica writes a live replica row, as package cluster's Join does.
func registerReplica(t *testing.T, db *dbutil.DB, id string) {
	t.Helper()
	_, err := db.Write().ExecContext(context.Background(), `INSERT INTO replicas (instance, name, host, pid, started_at, heartbeat_at) VALUES ($1, $1, 'h', 1, 0, 0)`, id)
	if err != nil {
		t.Fatal(err)
	}
}

func fenceReplica(t *testing.T, db *dbutil.DB, id string) {
	t.Helper()
	if _, err := db.Write().ExecContext(context.Background(), `UPDATE replicas SET fenced_at = 1 WHERE instance = $1`, id); err != nil {
		t.Fatal(err)
	}
}

func claimedTexts(t *testing.T, s *gateway.Store) []string {
	t.Helper()
	claimed, err := s.ClaimDue(context.Background(), 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range claimed {
		out = append(out, r.Text)
	}
	slices.Sort(out)
	return out
}

// Among replicas, a channel's replies are claimed by the replica holding
// the channel only, and a replica's own channels' (the API's) by the
// replica that queued them, until it is dead. A channel nobody here runs
// keeps its replies pending: never claimed and failed by a replica that
// can't send them.
func TestRepliesAreClaimedByTheChannelsHolder(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Postgres(t)
	registerReplica(t, db, "a")
	registerReplica(t, db, "b")
	a := gateway.NewStore(db, nil, gateway.Owner("a"), gateway.Cluster(),
		gateway.ClaimChannels(func() ([]string, []string) { return []string{"tg"}, []string{"api"} }))
	b := gateway.NewStore(db, nil, gateway.Owner("b"), gateway.Cluster(),
		gateway.ClaimChannels(func() ([]string, []string) { return nil, []string{"api"} }))
	queue := func(s *gateway.Store, key string, adapter string, chat string) {
		t.Helper()
		if err := s.QueueReplies(ctx, []gateway.Reply{{Key: key, Adapter: adapters.ID(adapter), ChatID: chat, Text: key}}); err != nil {
			t.Fatal(err)
		}
	}
	queue(b, "tg from b", "tg", "1")
	queue(a, "api from a", "api", "2")
	queue(b, "api from b", "api", "3")
	queue(a, "discord from a", "discord", "4")
	if got := claimedTexts(t, b); !slices.Equal(got, []string{"api from b"}) {
		t.Fatalf("b claimed %q; want only its own API reply", got)
	}
	if got := claimedTexts(t, a); !slices.Equal(got, []string{"api from a", "tg from b"}) {
		t.Fatalf("a claimed %q; want the Telegram reply (a holds tg) and its own API reply", got)
	}
	// a dies: its API replies are b's to send.
	queue(a, "api from a, later", "api", "5")
	if got := claimedTexts(t, b); len(got) != 0 {
		t.Fatalf("b claimed %q from a live a", got)
	}
	fenceReplica(t, db, "a")
	if got := claimedTexts(t, b); !slices.Equal(got, []string{"api from a, later"}) {
		t.Fatalf("b claimed %q after a died; want a's API reply", got)
	}
	if n, err := b.Reclaim(ctx); err != nil || n != 2 {
		t.Fatalf("b took back %d of a's claims (%v); want its 2 unrecorded ones", n, err)
	}
}

// Among replicas, the messages of a fenced replica are taken over, and
// those of a live one are not, however old their leases.
func TestClusterTakesOverOnlyFencedReplicas(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Postgres(t)
	registerReplica(t, db, "a")
	registerReplica(t, db, "b")
	a := gateway.NewStore(db, nil, gateway.Owner("a"), gateway.Cluster(), gateway.Lease(time.Millisecond))
	b := gateway.NewStore(db, nil, gateway.Owner("b"), gateway.Cluster())
	id, _, err := a.Accept(ctx, inbound("m1"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // a's message lease lapses: no matter
	if un, err := b.Unfinished(ctx, 10, false); err != nil || len(un) != 0 {
		t.Fatalf("b took %v (%v) from a live replica", un, err)
	}
	fenceReplica(t, db, "a")
	un, err := b.Unfinished(ctx, 10, false)
	if err != nil || len(un) != 1 || un[0].ID != id {
		t.Fatalf("b took %v (%v) from a fenced replica; want %s", un, err, id)
	}
	// Handed over to b, it is b's to answer, and listed for pickup only
	// when another replica hands b a message.
	if fwd, err := b.Forwarded(ctx, 10); err != nil || len(fwd) != 0 {
		t.Fatalf("forwarded to b: %v (%v); want none", fwd, err)
	}
	id2, _, err := b.Accept(ctx, inbound("m2"))
	if err != nil {
		t.Fatal(err)
	}
	registerReplica(t, db, "c")
	if ok, err := b.Forward(ctx, id2, "lane:x", "c"); err != nil || !ok {
		t.Fatalf("hand m2 to c: %v %v", ok, err)
	}
	c := gateway.NewStore(db, nil, gateway.Owner("c"), gateway.Cluster())
	if fwd, err := c.Forwarded(ctx, 10); err != nil || len(fwd) != 1 || fwd[0].ID != id2 {
		t.Fatalf("forwarded to c: %v (%v); want m2", fwd, err)
	}
	fenceReplica(t, db, "a")
	if ok, err := b.Forward(ctx, id2, "lane:x", "a"); err != nil || ok {
		t.Fatalf("handing a message to a fenced replica: %v %v; want refused", ok, err)
	}
}
