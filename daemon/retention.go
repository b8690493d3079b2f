package daemon

import (
	"context"
	"time"
)

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
