package gateway_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/migrations"
	"github.com/parleyd/parley/sessions/storetest"
)

// outage takes the database out of reach of the store's writes and
// brings it back: on PostgreSQL a write fence that refuses them
// (dbutil.ErrLeaseLapsed passes as an unavailable database), on SQLite
// another connection holding the write lock past the busy timeout.
type outage struct {
	fenced atomic.Bool
	path   string // SQLite's file
	held   *sql.Conn
	locker *sql.DB
}

func (o *outage) Alive() error {
	if o.fenced.Load() {
		return dbutil.ErrLeaseLapsed
	}
	return nil
}

func (o *outage) Check(context.Context, dbutil.Querier) error { return o.Alive() }

func (o *outage) cut() error {
	if o.path == "" {
		o.fenced.Store(true)
		return nil
	}
	conn, err := o.locker.Conn(context.Background())
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		return err
	}
	o.held = conn
	return nil
}

func (o *outage) restore() {
	o.fenced.Store(false)
	if o.held != nil {
		_, _ = o.held.ExecContext(context.Background(), "ROLLBACK")
		o.held.Close()
		o.held = nil
	}
}

// outageDB opens a fresh database of engine with an outage to cut it.
func outageDB(t *testing.T, engine string) (*dbutil.DB, *outage) {
	t.Helper()
	ctx := context.Background()
	if engine == "postgres" {
		db := dbtest.Postgres(t)
		o := &outage{}
		db.SetFence(o)
		return db, o
	}
	path := filepath.Join(t.TempDir(), "parley.db")
	db, err := dbutil.Open(ctx, dbutil.Options{URL: path, BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	locker, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close() })
	return db, &outage{path: path, locker: locker}
}

// cutAfterSend is an adapter whose sends of texts starting with cut take
// the database away right after the platform took them.
type cutAfterSend struct {
	*adapterstest.Recorder
	cut string
	db  *outage
}

func (c cutAfterSend) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	sent, err := c.Recorder.Send(ctx, out)
	if err == nil && strings.HasPrefix(out.Text, c.cut) {
		if cerr := c.db.cut(); cerr != nil {
			return sent, cerr
		}
	}
	return sent, err
}

// A reply the platform took while the database was going away, and a
// claimed reply left unsent while the replica's lease had lapsed, hold
// their chats up only until the database answers again: the sender then
// records what it missed and takes its own claims back, and the chats'
// next replies go out at once, not when the claims lapse; none twice.
func TestSenderSettlesItsClaimsWhenTheDatabaseReturns(t *testing.T) {
	for _, engine := range dbtest.Engines() {
		t.Run(engine.Name, func(t *testing.T) { testSenderSettles(t, engine.Name) })
	}
}

func testSenderSettles(t *testing.T, engine string) {
	if engine == "postgres" {
		dbtest.RequirePostgres(t)
	}
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	db, cut := outageDB(t, engine)
	store := gateway.NewStore(db, clock.Now)
	rec := adapterstest.New()
	var lapsed atomic.Bool
	s := senderFor(store, cutAfterSend{rec, "a1", cut}, gateway.SenderOptions{Lease: time.Minute, Alive: func() (time.Time, error) {
		if lapsed.Load() {
			return time.Time{}, dbutil.ErrLeaseLapsed
		}
		return time.Time{}, nil
	}})
	if err := store.QueueReplies(ctx, []gateway.Reply{
		{Key: "a:1", Adapter: "tg", ChatID: "1", Text: "a1"},
		{Key: "a:2", Adapter: "tg", ChatID: "1", Text: "a2"},
	}); err != nil {
		t.Fatal(err)
	}
	// a1 reaches the chat; its record doesn't reach the database.
	if _, err := s.SendDue(ctx); err == nil {
		t.Fatal("a pass whose record failed reported no error")
	}
	cut.restore()
	clock.Advance(time.Second)
	if n, err := s.SendDue(ctx); err != nil || n != 1 {
		t.Fatalf("the pass after the database returned sent %d (%v); want a2 at once, not when a1's claim lapses", n, err)
	}
	if got := texts(rec.Sent()); got != "a1 a2" {
		t.Fatalf("the chat saw %q; want a1 a2, each once", got)
	}

	// b1 is claimed while the lease has lapsed, and left unsent.
	if err := store.QueueReplies(ctx, []gateway.Reply{{Key: "b:1", Adapter: "tg", ChatID: "2", Text: "b1"}}); err != nil {
		t.Fatal(err)
	}
	lapsed.Store(true)
	if n, _ := s.SendDue(ctx); n != 0 {
		t.Fatalf("sent %d with the lease lapsed", n)
	}
	lapsed.Store(false)
	clock.Advance(time.Second)
	if n, err := s.SendDue(ctx); err != nil || n != 1 {
		t.Fatalf("the pass after the lease was renewed sent %d (%v); want b1 at once", n, err)
	}
	if got := texts(rec.Sent()); got != "a1 a2 b1" {
		t.Fatalf("sent %q", got)
	}
}

func texts(out []adapters.Outbound) string {
	var s []string
	for _, o := range out {
		s = append(s, o.Text)
	}
	return strings.Join(s, " ")
}
