package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

func fastOptions(name string) Options {
	return Options{Name: name, Lease: 600 * time.Millisecond, Heartbeat: 100 * time.Millisecond}
}

func write(ctx context.Context, db *dbutil.DB) error {
	return db.Tx(ctx, func(q dbutil.Querier) error {
		_, err := q.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS probe (n INT)")
		return err
	})
}

// A replica that stops renewing (paused) is fenced by a survivor: its
// holds pass to the survivor, and it writes nothing after it resumes: its
// local check refuses first, then the database's fence, and its heartbeat
// tells it to stop.
func TestPausedReplicaIsFencedAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	dbA, dbB := dbtest.TwoHandles(t, "postgres")
	a, b := New(dbA, fastOptions("a")), New(dbB, fastOptions("b"))
	if err := a.Join(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Join(ctx); err != nil {
		t.Fatal(err)
	}
	if a.ID() == b.ID() || !strings.HasPrefix(a.ID(), "a-") {
		t.Fatalf("ids %q and %q: want unique, named", a.ID(), b.ID())
	}
	if h, err := a.Claim(ctx, "lane:x"); err != nil || h != a.ID() {
		t.Fatalf("a claims a free lane: holder %q, %v", h, err)
	}
	if h, err := b.Claim(ctx, "lane:x"); err != nil || h != a.ID() {
		t.Fatalf("b claims a's lane: holder %q, %v; want a's", h, err)
	}
	if err := write(ctx, dbA); err != nil {
		t.Fatalf("a live replica writes: %v", err)
	}
	live, err := b.Live(ctx)
	if err != nil || len(live) != 2 {
		t.Fatalf("live replicas %v, %v; want 2", live, err)
	}

	// a pauses: no heartbeat. b keeps its own and reaps.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := b.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if h, _ := b.Claim(ctx, "lane:x"); h == b.ID() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never took the lane over from a paused replica")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// a resumes: the local check refuses before any round trip.
	if err := write(ctx, dbA); !errors.Is(err, dbutil.ErrLeaseLapsed) && !errors.Is(err, ErrFenced) {
		t.Fatalf("a paused replica's write after its lease: %v; want refused", err)
	}
	if err := a.Heartbeat(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("its heartbeat: %v; want ErrFenced", err)
	}
	select {
	case <-a.Fenced():
	default:
		t.Fatal("Fenced not closed")
	}
	if err := write(ctx, dbA); !errors.Is(err, ErrFenced) {
		t.Fatalf("a fenced replica's write: %v; want ErrFenced", err)
	}
	live, _ = b.Live(ctx)
	if len(live) != 1 || live[0].ID != b.ID() || !live[0].Self {
		t.Fatalf("live after the fence: %+v; want b alone", live)
	}
}

// A write transaction that began before the fence commits before it; the
// fence waits for it rather than racing it.
func TestFenceWaitsForAWriteInFlight(t *testing.T) {
	ctx := context.Background()
	dbA, dbB := dbtest.TwoHandles(t, "postgres")
	a, b := New(dbA, Options{Name: "a", Lease: time.Hour}), New(dbB, fastOptions("b"))
	if err := a.Join(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Join(ctx); err != nil {
		t.Fatal(err)
	}
	inTx, release := make(chan struct{}), make(chan struct{})
	txErr := make(chan error, 1)
	go func() {
		txErr <- dbA.Tx(ctx, func(q dbutil.Querier) error {
			close(inTx)
			<-release
			_, err := q.ExecContext(ctx, "CREATE TABLE probe (n INT)")
			return err
		})
	}()
	<-inTx
	fenced := make(chan error, 1)
	go func() {
		_, err := b.fence(ctx, a.ID(), "test")
		fenced <- err
	}()
	select {
	case err := <-fenced:
		t.Fatalf("the fence went through (%v) while a's transaction was open", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-txErr; err != nil {
		t.Fatalf("the transaction begun before the fence: %v", err)
	}
	if err := <-fenced; err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, dbA); !errors.Is(err, ErrFenced) {
		t.Fatalf("a transaction after the fence: %v; want ErrFenced", err)
	}
}

// Two live processes can't share an explicit replica name; a name whose
// process died is taken over once its heartbeat lapses.
func TestExplicitNameIsExclusive(t *testing.T) {
	ctx := context.Background()
	dbA, dbB := dbtest.TwoHandles(t, "postgres")
	opts := fastOptions("same")
	opts.Explicit = true
	a := New(dbA, opts)
	if err := a.Join(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(runCtx, nil) }()
	err := New(dbB, opts).Join(ctx)
	if err == nil || !strings.Contains(err.Error(), `uses replica_id "same"`) {
		t.Fatalf("a second live process named alike: %v; want refused, naming the id", err)
	}
	stop()
	<-done
	// a dies (no heartbeat): the name is free once its lease lapses.
	if err := New(dbB, opts).Join(ctx); err != nil {
		t.Fatalf("the name of a dead replica: %v", err)
	}
}

// A clean leave frees the replica's holds at once.
func TestLeaveFreesHolds(t *testing.T) {
	ctx := context.Background()
	dbA, dbB := dbtest.TwoHandles(t, "postgres")
	a, b := New(dbA, Options{Name: "a", Lease: time.Hour}), New(dbB, Options{Name: "b", Lease: time.Hour})
	for _, m := range []*Member{a, b} {
		if err := m.Join(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Claim(ctx, ChannelHold("tg")); err != nil {
		t.Fatal(err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := b.Claim(ctx, ChannelHold("tg")); err != nil || h != b.ID() {
		t.Fatalf("after a left, b's claim: %q, %v", h, err)
	}
}

// A replica's heartbeat doesn't queue behind its own workload: with every
// connection of its pool busy and more statements waiting for one, a
// heartbeat still goes through at once. Queued behind them past the lease,
// it lapsed the replica (its writes refused, its peers fencing it), which
// `parley bench` on PostgreSQL met at 1,000 conversations.
func TestHeartbeatGoesThroughAPoolTheWorkloadHolds(t *testing.T) {
	ctx := context.Background()
	dbA, _ := dbtest.TwoHandles(t, "postgres")
	a := New(dbA, Options{Name: "busy", Lease: 5 * time.Second, Heartbeat: time.Hour})
	if err := a.Join(ctx); err != nil {
		t.Fatal(err)
	}
	// More statements than the pool has connections (10), each holding
	// its connection for 3 s.
	busy, cancel := context.WithCancel(ctx)
	defer cancel()
	const held = 14
	started := make(chan struct{}, held)
	done := make(chan error, held)
	for range held {
		go func() {
			started <- struct{}{}
			_, err := dbA.Writer().ExecContext(busy, "SELECT pg_sleep(3)")
			done <- err
		}()
	}
	for range held {
		<-started
	}
	deadline := time.Now().Add(5 * time.Second)
	for dbA.Writer().Stats().InUse < 10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := dbA.Writer().Stats().InUse; n < 10 {
		t.Fatalf("only %d of the pool's connections busy", n)
	}
	beatCtx, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	start := time.Now()
	if err := a.Heartbeat(beatCtx); err != nil {
		t.Fatalf("a heartbeat while the pool is busy: %v (after %v)", err, time.Since(start))
	}
	if err := a.Alive(); err != nil {
		t.Fatalf("alive after the heartbeat: %v", err)
	}
	cancel()
	for range held {
		<-done
	}
}

// A replica paused inside a write transaction (its fence lock held
// shared) is fenced all the same, within seconds: the fence ends its open
// transaction rather than wait for a process that may never run again,
// and the transaction, resumed, commits nothing.
func TestReplicaPausedInsideATransactionIsFenced(t *testing.T) {
	ctx := context.Background()
	dbA, dbB := dbtest.TwoHandles(t, "postgres")
	a, b := New(dbA, fastOptions("a")), New(dbB, fastOptions("b"))
	if err := a.Join(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Join(ctx); err != nil {
		t.Fatal(err)
	}
	inTx, release := make(chan struct{}), make(chan struct{})
	txErr := make(chan error, 1)
	go func() {
		txErr <- dbA.Tx(ctx, func(q dbutil.Querier) error {
			close(inTx)
			<-release // paused here, its heartbeat stopped too
			_, err := q.ExecContext(ctx, "CREATE TABLE paused_write (n INT)")
			return err
		})
	}()
	<-inTx
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	start := time.Now()
	for {
		if err := b.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := b.Reap(ctx)
		if err == nil && n == 1 {
			break
		}
		if time.Since(start) > 4*time.Second {
			t.Fatalf("a replica paused inside a transaction was not fenced within 4s (last reap: %d, %v)", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("fenced %s after the pause began (lease %s)", time.Since(start).Round(10*time.Millisecond), fastOptions("").Lease)
	close(release)
	if err := <-txErr; err == nil {
		t.Fatal("the paused transaction committed after its replica was fenced")
	}
	var exists bool
	if err := dbB.Read().QueryRowContext(ctx, "SELECT to_regclass('paused_write') IS NOT NULL").Scan(&exists); err != nil || exists {
		t.Fatalf("the paused transaction's table exists: %v %v; want nothing written", exists, err)
	}
}

// The hop proof: a live replica's signature over the request's method,
// path and time; a changed path, a stale time, a forged signature or a
// fenced sender is no proof.
func TestHopProof(t *testing.T) {
	ctx := context.Background()
	dbA, dbB := dbtest.TwoHandles(t, "postgres")
	a, b := New(dbA, Options{Name: "a", Lease: time.Hour}), New(dbB, Options{Name: "b", Lease: time.Hour})
	for _, m := range []*Member{a, b} {
		if err := m.Join(ctx); err != nil {
			t.Fatal(err)
		}
	}
	proof := a.SignHop("GET", "/v1/sessions/s1/status")
	if !b.VerifyHop(ctx, proof, "GET", "/v1/sessions/s1/status") {
		t.Fatal("b refused a's proof")
	}
	fields := strings.Fields(proof)
	stale := fields[0] + " " + strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10) + " " + fields[2]
	for _, tc := range []struct{ name, proof, method, path string }{
		{"another path", proof, "GET", "/v1/sessions/s2/status"},
		{"another method", proof, "POST", "/v1/sessions/s1/status"},
		{"stale", stale, "GET", "/v1/sessions/s1/status"},
		{"forged", fields[0] + " " + fields[1] + " " + strings.Repeat("0", 64), "GET", "/v1/sessions/s1/status"},
		{"a bare id", a.ID(), "GET", "/v1/sessions/s1/status"},
		{"unknown replica", "nobody " + fields[1] + " " + fields[2], "GET", "/v1/sessions/s1/status"},
	} {
		if b.VerifyHop(ctx, tc.proof, tc.method, tc.path) {
			t.Errorf("%s: taken as proof", tc.name)
		}
	}
	if _, err := b.fence(ctx, a.ID(), "test"); err != nil {
		t.Fatal(err)
	}
	if New(dbB, Options{Name: "c"}).VerifyHop(ctx, proof, "GET", "/v1/sessions/s1/status") {
		t.Error("a fenced replica's proof taken")
	}
}
