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
)

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
			dbtest.EachTwoHandles(t, func(t *testing.T, a, b *dbutil.DB) {
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

// configJob is a config file's job.
func configJob(id, prompt string) cron.Job {
	return cron.Job{ID: id, Schedule: "0 9 * * *", Timezone: "UTC", AgentID: "main", Prompt: prompt}
}

func (e *env) syncConfig(jobs ...cron.Job) {
	e.t.Helper()
	if err := e.store.SyncConfig(context.Background(), jobs); err != nil {
		e.t.Fatal(err)
	}
}

// jobIDs lists the stored jobs as "id=prompt".
func (e *env) jobIDs() string {
	e.t.Helper()
	jobs, err := e.store.List(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID+"="+j.Prompt)
	}
	return fmt.Sprint(out)
}

// A replica started with a config that lacks a job of another running
// replica's config leaves the job in place; the job goes once no running
// replica's config has it: at once after its last declarer stopped, or
// once the declaration of one that crashed lapsed. Of two configs that
// define a job differently, the last to start sets it.
func TestConfigJobsOfAnotherReplicaAreKept(t *testing.T) {
	dbtest.RequirePostgres(t)
	a, b := dbtest.TwoHandles(t, "postgres")
	clk := crontest.NewClock(mustTime(t, "2025-06-02T10:00:00Z"))
	e1 := newEnvClock(t, a, clk)
	e1.syncConfig(configJob("report", "from one"), configJob("both", "one's"), configJob("mine", "one's only"))
	s1 := e1.start()
	// A process that stored its config and crashed before its scheduler
	// ran: its declaration lapses.
	crashed := newEnvClock(t, b, clk)
	crashed.syncConfig(configJob("crashed", "never renewed"))

	e2 := newEnvClock(t, b, clk)
	e2.sink = e1.sink
	e2.syncConfig(configJob("report", "from one"), configJob("both", "two's"))
	e2.start()
	const all = "[both=two's crashed=never renewed mine=one's only report=from one]"
	if got := e2.jobIDs(); got != all {
		t.Fatalf("jobs after the second replica started = %s, want %s", got, all)
	}
	// A reload of the second replica's config changes nothing either.
	e2.syncConfig(configJob("report", "from one"), configJob("both", "two's"))
	if got := e2.jobIDs(); got != all {
		t.Fatalf("jobs after a reload = %s, want %s", got, all)
	}

	// Both keep renewing; the crashed process's declaration lapses.
	for range 3 * cron.ConfigLease / (10 * time.Second) {
		clk.Step(t, 10*time.Second)
	}
	if got, want := e2.jobIDs(), "[both=two's mine=one's only report=from one]"; got != want {
		t.Fatalf("jobs once the crashed process's declaration lapsed = %s, want %s", got, want)
	}

	// The first replica stops: the job only its config had goes at the
	// second's next renewal, well before a lease would lapse.
	s1.stop()
	clk.Step(t, cron.ConfigLease/3)
	if got, want := e2.jobIDs(), "[both=two's report=from one]"; got != want {
		t.Fatalf("jobs once the first replica stopped = %s, want %s", got, want)
	}
}

// A single process restarted with a config that lacks a job removes it:
// at once after a clean stop (the stopped scheduler withdrew its
// declaration); after a crash, at once on SQLite (one process holds the
// file, so the earlier one is gone) and on PostgreSQL once the crashed
// process's declaration lapses (another replica could have declared it).
func TestConfigJobGoneFromTheConfigIsRemovedAfterARestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool
	}{
		{"clean stop", false},
		{"crash", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
				db := open(t)
				e1 := newEnv(t, db, "2025-06-02T10:00:00Z")
				e1.syncConfig(configJob("kept", "k"), configJob("dropped", "d"))
				if !tc.crash {
					e1.start().stop()
				}
				clk := e1.clk
				clk.Advance(time.Second)
				e2 := newEnvClock(t, db, clk)
				e2.syncConfig(configJob("kept", "k"))
				e2.start()
				const after = "[kept=k]"
				if tc.crash && db.Dialect == dbutil.Postgres {
					if got := e2.jobIDs(); got != "[dropped=d kept=k]" {
						t.Fatalf("jobs right after the restart = %s, want the crashed process's kept for its lease", got)
					}
					for range cron.ConfigLease / (10 * time.Second) {
						clk.Step(t, 10*time.Second)
					}
				}
				if got := e2.jobIDs(); got != after {
					t.Fatalf("jobs after the restart = %s, want %s", got, after)
				}
			})
		})
	}
}

// A start with no config jobs writes nothing while no config job or
// declaration is stored, and still removes the config jobs of a config
// that had some (here after a clean stop, which withdrew their
// declarations).
func TestEmptyConfigWritesNothingUnlessConfigJobsAreStored(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		e1 := newEnv(t, db, "2025-06-02T10:00:00Z")
		e1.add(cron.Job{ID: "cli-job", Schedule: "@hourly"})
		writes := db.Transactions()
		e1.syncConfig()
		if n := db.Transactions() - writes; n != 0 {
			t.Fatalf("an empty config with no config job stored made %d write transactions; want 0", n)
		}
		e1.syncConfig(configJob("daily", "d"))
		e1.start().stop()

		e2 := newEnvClock(t, db, e1.clk)
		e2.syncConfig()
		if got, want := e2.jobIDs(), "[cli-job=Write the report.]"; got != want {
			t.Fatalf("jobs after a restart with no config jobs = %s, want %s", got, want)
		}
	})
}
