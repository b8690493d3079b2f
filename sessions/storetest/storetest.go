// Package storetest is the conformance suite for sessions.Store. Each engine
// runs it with a function that opens a fresh, migrated database.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/migrations"
	"github.com/parleyd/parley/sessions"
)

// Clock is a settable clock for tests.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// env is what each case gets: a fresh store with its clock, bus and database.
type env struct {
	t     *testing.T
	db    *dbutil.DB
	store *sessions.SQLStore
	clock *Clock
	bus   *events.Bus
	ctx   context.Context
}

func newEnv(t *testing.T, open dbtest.Opener) *env {
	db := open(t)
	clock := NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	bus := events.New()
	return &env{
		t: t, db: db, clock: clock, bus: bus, ctx: context.Background(),
		store: sessions.NewStore(db, sessions.WithClock(clock.Now), sessions.WithBus(bus)),
	}
}

// Run runs every case against databases from open.
func Run(t *testing.T, open dbtest.Opener) {
	cases := []struct {
		name string
		fn   func(e *env)
	}{
		{"Migrations", testMigrations},
		{"CreateAndResolve", testCreateAndResolve},
		{"InvalidKey", testInvalidKey},
		{"IdleReset", testIdleReset},
		{"DailyResetAcrossTimeZone", testDailyResetAcrossTimeZone},
		{"DailyResetAcrossDST", testDailyResetAcrossDST},
		{"ManualReset", testManualReset},
		{"GroupSessions", testGroupSessions},
		{"ConcurrentResolve", testConcurrentResolve},
		{"ConcurrentResolveOfStaleSession", testConcurrentResolveOfStale},
		{"AppendOrder", testAppendOrder},
		{"ConcurrentAppend", testConcurrentAppend},
		{"MessageRoundTrip", testMessageRoundTrip},
		{"MetadataTravels", testMetadataTravels},
		{"Rollups", testRollups},
		{"LiveContextAndHistory", testLiveContextAndHistory},
		{"AwkwardText", testAwkwardText},
		{"IdempotentAppend", testIdempotentAppend},
		{"AppendToArchived", testAppendToArchived},
		{"AppendRollsBack", testAppendRollsBack},
		{"Pagination", testPagination},
		{"ListFilters", testListFilters},
		{"RenameAndDelete", testRenameAndDelete},
		{"Events", testEvents},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(newEnv(t, open))
		})
	}
}

func testMigrations(e *env) {
	p, err := migrations.Provider(e.db, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	current, target, err := p.GetVersions(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if current != target || current < 2 {
		e.t.Fatalf("database at migration %d, binary ships %d", current, target)
	}
	if pending, err := p.HasPending(e.ctx); err != nil || pending {
		e.t.Fatalf("pending migrations after Up: %v %v", pending, err)
	}
}
