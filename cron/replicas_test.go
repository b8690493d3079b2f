package cron_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/cron/crontest"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/migrations"
)

// replicaDBs opens two handles on one fresh, migrated database, as two
// replicas have: two pools on one PostgreSQL schema, or two processes on
// one SQLite file.
func replicaDBs(t *testing.T, engine string) (*dbutil.DB, *dbutil.DB) {
	t.Helper()
	ctx := context.Background()
	url := t.TempDir() + "/parley.db"
	if engine == "postgres" {
		url = dbtest.PostgresURL(t)
	}
	open := func() *dbutil.DB {
		db, err := dbutil.Open(ctx, dbutil.Options{URL: url})
		if err != nil {
			t.Fatalf("open %s: %v", engine, err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a := open()
	if _, err := migrations.Up(ctx, a, nil); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return a, open()
}

// eachReplicaEngine runs fn once per engine with two handles on one
// database; PostgreSQL is skipped with the standard message when it is not
// configured.
func eachReplicaEngine(t *testing.T, fn func(t *testing.T, a, b *dbutil.DB)) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			a, b := replicaDBs(t, e.Name)
			fn(t, a, b)
		})
	}
}

// Two replicas, each with its own scheduler on its own database handle,
// started a second apart (so each would count an @every job's interval
// from its own start), run each due fire of the job once between them:
// the fire times are counted from the job's creation, and a fire's
// receipt is unique per (job, scheduled time).
func TestEveryFiresOnceAcrossReplicas(t *testing.T) {
	for _, tc := range []struct {
		name, schedule string
		every          time.Duration
	}{
		{"every second", "@every 1s", time.Second},
		{"every three seconds", "@every 3s", 3 * time.Second},
		{"every fifteen seconds", "@every 15s", 15 * time.Second},
		{"fixed, every five seconds", "*/5 * * * * *", 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachReplicaEngine(t, func(t *testing.T, a, b *dbutil.DB) {
				clk := crontest.NewClock(mustTime(t, "2025-06-02T10:00:00Z").Add(400 * time.Millisecond))
				e1 := newEnvClock(t, a, clk)
				e1.add(cron.Job{ID: "tick", Schedule: tc.schedule})
				s1 := e1.start()
				clk.Step(t, 1300*time.Millisecond)
				e2 := newEnvClock(t, b, clk)
				// One gateway view: a replica starting delivers again the
				// runs still open, and the shared inbound table drops them.
				e2.sink = e1.sink
				e2.start()

				const span = 75 * time.Second
				start := clk.Now()
				fires := map[string]int{} // by chat id: scheduled time
				for clk.Now().Sub(start) < span {
					clk.Step(t, 250*time.Millisecond)
					// Each fire's turn answers before the next, so none is
					// skipped for overlap.
					for len(e1.sink.got) > 0 {
						in := <-e1.sink.got
						fires[in.ChatID]++
						e1.reply(s1, in.ChatID, "tock")
					}
				}
				// The due fires: the schedule's times after the job's
				// creation, up to now (the first replica was there for all).
				job, err := e1.store.Job(context.Background(), "tick")
				if err != nil {
					t.Fatal(err)
				}
				sched, err := job.ParsedSchedule()
				if err != nil {
					t.Fatal(err)
				}
				var due []string
				for at := sched.Next(job.CreatedAt); !at.After(clk.Now()); at = sched.Next(at) {
					due = append(due, fmt.Sprintf("tick:%d", at.UnixMilli()))
				}
				if want := int(span / tc.every); len(due) < want {
					t.Fatalf("%d fires due in %s, want at least %d", len(due), span, want)
				}
				var got []string
				for chat, n := range fires {
					if n != 1 {
						t.Errorf("fire %s delivered %d times", chat, n)
					}
					got = append(got, chat)
				}
				sort.Strings(got)
				if fmt.Sprint(got) != fmt.Sprint(due) {
					t.Fatalf("fired %d times:\n%v\nwant the %d due fires:\n%v", len(got), got, len(due), due)
				}
				runs := e1.runs("tick")
				if len(runs) != len(due) {
					t.Fatalf("%d receipts for %d due fires: %+v", len(runs), len(due), runs)
				}
				for _, r := range runs {
					if r.Status != cron.StatusOK {
						t.Fatalf("receipt %+v, want every fire answered", r)
					}
				}
			})
		})
	}
}
