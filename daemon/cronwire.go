package daemon

import (
	"context"
	"fmt"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

// openCron builds the scheduler on parley's database, with the config's
// jobs written in. It is the "cron" channel: its fires enter the gateway
// like any message, and their replies come back to it.
func (d *Daemon) openCron(ctx context.Context) error {
	jobs, err := cron.JobsOf(d.cfg())
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
			return d.queueNote(ctx, q, n.Target.String(), n.Text, n.Key, n.Files...)
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
