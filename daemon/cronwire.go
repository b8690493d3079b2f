package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

// cronJobs turns the config's jobs into the cron package's, checking each
// schedule; a problem names the job's key and line.
func cronJobs(cfg *config.Config) ([]cron.Job, error) {
	var jobs []cron.Job
	var errs []error
	for i, cj := range cfg.Cron.Jobs {
		p := fmt.Sprintf("cron.jobs[%d]", i)
		targets, err := cron.ParseTargets(cj.Notify)
		if err != nil {
			errs = append(errs, cfg.Problem(p+".notify", err.Error()))
			continue
		}
		j := cron.Job{ID: cj.ID, Schedule: cj.Schedule, Timezone: cj.Timezone, AgentID: cj.Agent, Prompt: cj.Prompt,
			Notify: targets, Disabled: !cj.IsEnabled(), CatchUp: cj.CatchUp.Std(), Timeout: cj.Timeout.Std(), Source: cron.SourceConfig}
		// The schedule is the likeliest mistake: point at its line.
		if _, err := cron.ParseSchedule(cj.Schedule, cj.Timezone); err != nil {
			errs = append(errs, cfg.Problem(p+".schedule", err.Error()))
			continue
		}
		if err := j.Validate(); err != nil {
			errs = append(errs, cfg.Problem(p, err.Error()))
			continue
		}
		jobs = append(jobs, j)
	}
	return jobs, errors.Join(errs...)
}

// openCron builds the scheduler on parley's database, with the config's
// jobs written in. It is the "cron" channel: its fires enter the gateway
// like any message, and their replies come back to it.
func (d *Daemon) openCron(ctx context.Context) error {
	jobs, err := cronJobs(d.cfg())
	if err != nil {
		return err
	}
	store := cron.NewStore(d.db, nil)
	if err := store.SyncConfig(ctx, jobs); err != nil {
		return fmt.Errorf("store the config's cron jobs: %w", err)
	}
	d.cron, err = cron.New(cron.Options{
		Store:    store,
		Notifier: cron.NotifierFunc(d.notifyRun),
		QueueNote: func(ctx context.Context, q dbutil.Querier, n cron.Notice) error {
			return d.queueNote(ctx, q, n.Target.String(), n.Text, n.Key)
		},
		Abort:      func(k sessions.Key) bool { return d.gw.Abort(k) },
		OnEnd:      func(st cron.Status) { d.metrics.CronRun(string(st)) },
		Unattended: d.cronUnattended,
		Jobs:       func() int { return len(d.cfg().Cron.Jobs) },
		Log:        d.named("cron"),
	})
	return err
}

// notifyRun sends a cron run's result to one target.
func (d *Daemon) notifyRun(ctx context.Context, n cron.Notice) error {
	return d.notify(ctx, n.Target.String(), n.Text, n.Key)
}

// cronTarget is the chat a session's scheduled jobs report to by default:
// the session's own, on the one channel of its surface. With several
// channels of one type, it can't tell which, and the job only keeps its
// results (the tool says so).
func (d *Daemon) cronTarget(_ context.Context, key sessions.Key) (cron.Target, bool) {
	var match []config.Adapter
	for _, a := range d.cfg().Adapters {
		if a.Type == key.Surface {
			match = append(match, a)
		}
	}
	if len(match) != 1 {
		return cron.Target{}, false
	}
	return cron.Target{Adapter: adapters.ID(match[0].ID), ChatID: key.SurfaceID}, true
}
