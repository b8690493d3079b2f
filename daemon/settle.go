package daemon

import (
	"context"
	"github.com/parleyd/parley/internal/trim"
	"runtime/debug"
	"time"
)

// trimAfter is when, after start, the pages only start-up used are handed
// back.
const trimAfter = 300 * time.Millisecond

// settleEvery is how often the daemon looks whether a busy spell has ended
// (a variable for the tests).
var settleEvery = 5 * time.Second

const (
	// busySpell is how many write transactions since the last settling
	// make a spell worth settling after; a quiet daemon's own upkeep
	// (cron, retention) writes far fewer.
	busySpell = 200
	// quietWrites is at most how many write transactions a settleEvery may
	// see for the daemon to count as quiet again.
	quietWrites = 2
)

// remapped is how much of the binary a quiet daemon may map again (a
// poll's first read of the database after a while, an API call) before
// it is unmapped again, at most every retrimEvery (a variable for the
// tests).
var remapped int64 = 2 << 20

// retrimEvery is how often at most a quiet daemon unmaps again what came
// back (a variable for the tests).
var retrimEvery = 30 * time.Second

// settle hands back memory once start-up is over, and again each time a
// busy spell ends: a burst fills the Go heap, SQLite's page caches and the
// binary's mapped pages, and a daemon that then sits idle for hours
// should not hold them. It forgets the histories the session store keeps
// for the next turns and the API's events of finished runs (both are
// read again from the database when asked for) and the prompts the echo
// model remembers (for tests; each holds a whole history), returns the
// freed heap to the system, closes SQLite's idle readers and empties the
// writer's cache, and unmaps the binary's pages (trim.Resident).
func (d *Daemon) settle(ctx context.Context) {
	var (
		trimmedAt   time.Time
		trimmedSize int64
	)
	unmap := func() {
		trim.Resident()
		trimmedAt, trimmedSize = time.Now(), trim.FileResident()
	}
	select {
	case <-time.After(trimAfter):
		unmap()
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(settleEvery)
	defer t.Stop()
	// Start-up counts as a spell: what its last steps mapped again (the
	// first polls' statements, say) goes once the daemon is quiet.
	settled := d.db.Transactions() - busySpell
	last := d.db.Transactions()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := d.db.Transactions()
		quiet := now-last <= quietWrites
		last = now
		if !quiet {
			continue
		}
		if now-settled < busySpell {
			// Quiet, but no spell: unmap what was mapped again since.
			if time.Since(trimmedAt) >= retrimEvery && trim.FileResident()-trimmedSize >= remapped {
				d.retrims.Add(1)
				unmap()
			}
			continue
		}
		settled = now
		d.settlings.Add(1)
		d.sessions.ReleaseCaches()
		d.offline.Forget()
		if d.events != nil {
			d.events.Release()
		}
		debug.FreeOSMemory()
		if err := d.db.ShrinkMemory(ctx); err != nil && ctx.Err() == nil {
			d.log.DebugContext(ctx, "shrink the database's memory", "error", err)
		}
		unmap()
	}
}

// ReleaseInitPages unmaps the binary's pages that package initialization
// touched, for a process about to run the daemon: the initialization of
// the protocol libraries (WhatsApp's protobuf descriptors above all) runs
// once and maps megabytes of code and tables that nothing uses again.
// The pages stay in the page cache (see trim.Resident), and what the
// daemon needs is mapped again on first use.
func ReleaseInitPages() { trim.Resident() }
