package cron_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/cron/crontest"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

func everyFive(id, prompt string) cron.Job {
	return cron.Job{ID: id, Schedule: "*/5 * * * * *", Timezone: "UTC", AgentID: "main", Prompt: prompt}
}

// A replica whose copy of a config job is out of date (another replica's
// config changed it) never fires its old version: the fire is checked
// against the stored job, and the replica reads the jobs again and fires
// the new version next.
func TestOutdatedCopyOfAJobIsNotFired(t *testing.T) {
	dbtest.EachTwoHandles(t, func(t *testing.T, a, b *dbutil.DB) {
		clk := crontest.NewClock(mustTime(t, "2025-06-02T10:00:00.500Z"))
		e1 := newEnvClock(t, a, clk)
		e1.syncConfig(everyFive("report", "old"))
		e1.start()
		// Another process (a replica, or the CLI beside the daemon) stores
		// the job anew.
		clk.Advance(time.Second)
		e2 := newEnvClock(t, b, clk)
		e2.syncConfig(everyFive("report", "new"))
		clk.Step(t, 4*time.Second) // 10:00:05.5: a fire was due
		for {
			select {
			case in := <-e1.sink.got:
				if in.Text == "old" {
					t.Fatalf("the outdated copy of the job fired at %s", in.Time)
				}
				continue
			default:
			}
			break
		}
		clk.Step(t, 5*time.Second)
		if in := e1.sink.next(t); in.Text != "new" {
			t.Fatalf("the next fire ran %q; want the job as stored now", in.Text)
		}
	})
}

// The last running replica whose config has a job removes it as it stops
// cleanly, while other replicas run: none of them fires it afterwards,
// though their schedulers had read it.
func TestJobGoesWithTheLastReplicaThatDefinesIt(t *testing.T) {
	dbtest.RequirePostgres(t)
	a, b := dbtest.TwoHandles(t, "postgres")
	ctx := context.Background()
	for _, id := range []string{"replica-1", "replica-2"} {
		if _, err := a.Write().ExecContext(ctx, `INSERT INTO replicas (instance, name, host, pid, started_at, heartbeat_at) VALUES ($1, $1, 'h', 1, 0, 0)`, id); err != nil {
			t.Fatal(err)
		}
	}
	clk := crontest.NewClock(mustTime(t, "2025-06-02T10:00:00.500Z"))
	e1 := newEnvClock(t, a, clk)
	e1.syncConfig(everyFive("canary", "only one's config"))
	s1 := e1.start()
	e2 := newEnvClock(t, b, clk)
	e2.syncConfig() // its config has no jobs
	e2.start()
	s1.stop()
	if got := e2.jobIDs(); got != "[]" {
		t.Fatalf("jobs once the last replica defining it stopped = %s; want it removed at once", got)
	}
	clk.Step(t, 5*time.Second)
	e2.sink.none(t)
}
