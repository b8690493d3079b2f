package daemon

import (
	"context"
	"time"

	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// retireSession archives a cron fire's or webhook delivery's session once
// its one run has ended and its reply is queued: nothing else ever writes
// to it, and left active each would stay in sessions ls for ever (a
// minutely job adds 1,440 a day). It stays readable, archived.
func (d *Daemon) retireSession(ctx context.Context, in gateway.TurnInput) {
	if !in.Session.Key.SingleRun() {
		return
	}
	if _, err := d.sessions.Archive(context.WithoutCancel(ctx), in.Session.ID, sessions.ReasonFinished); err != nil {
		d.log.WarnContext(ctx, "archive a finished run's session; it stays active", "session_id", in.Session.ID, "error", err)
	}
}

// pruneEvery is how often archived sessions past sessions.prune_archived_after are deleted.
const pruneEvery = time.Hour

// pruneArchived deletes the sessions archived longer ago than the
// configured age, at start and then every pruneEvery, until ctx ends.
func (d *Daemon) pruneArchived(ctx context.Context) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		// Read at each pass, so a reload turns pruning on, off or changes it.
		if age := d.cfg().Sessions.PruneArchivedAfter.Std(); age > 0 {
			before := time.Now().Add(-age)
			res, err := d.sessions.PruneArchived(ctx, before)
			switch {
			case err != nil && ctx.Err() == nil:
				d.log.WarnContext(ctx, "prune archived sessions; the next pass tries again", "error", err)
			case res.Sessions > 0:
				d.log.InfoContext(ctx, "archived sessions pruned", "sessions", res.Sessions, "messages", res.Messages,
					"archived_before", before.UTC())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
