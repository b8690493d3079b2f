package daemon

import (
	"context"

	"github.com/parleyd/parley/internal/trim"
)

// newSettler hands memory back after start-up and each busy spell
// (trim.Settler): it forgets the histories the session store keeps for
// the next turns, the API's events of finished runs (both are read again
// from the database when asked for) and the prompts the echo model
// remembers (for tests; each holds a whole history), and closes SQLite's
// idle readers and empties the writer's cache.
func (d *Daemon) newSettler() *trim.Settler {
	return &trim.Settler{Transactions: d.db.Transactions,
		Release: func(context.Context) {
			d.sessions.ReleaseCaches()
			d.offline.Forget()
			if d.events != nil {
				d.events.Release()
			}
		},
		Shrink: func(ctx context.Context) {
			if err := d.db.ShrinkMemory(ctx); err != nil && ctx.Err() == nil {
				d.log.DebugContext(ctx, "shrink the database's memory", "error", err)
			}
		}}
}

// ReleaseInitPages unmaps the binary's pages that package initialization
// touched, for a process about to run the daemon: the initialization of
// the protocol libraries (WhatsApp's protobuf descriptors above all) runs
// once and maps megabytes of code and tables that nothing uses again.
// The pages stay in the page cache (see trim.Resident), and what the
// daemon needs is mapped again on first use.
func ReleaseInitPages() { trim.Resident() }
