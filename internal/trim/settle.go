package trim

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// TrimAfter is when, after start, the pages only start-up used are
// handed back.
const TrimAfter = 300 * time.Millisecond

const (
	// BusySpell is how many write transactions since the last settling
	// make a spell worth settling after; a quiet daemon's own upkeep
	// (cron, retention) writes far fewer.
	BusySpell = 200
	// quietWrites is at most how many write transactions a SettleEvery
	// may see for the daemon to count as quiet again.
	quietWrites = 2
)

// The settler's pace; variables for the tests.
var (
	// SettleEvery is how often a Settler looks whether a busy spell has
	// ended.
	SettleEvery = 5 * time.Second
	// Remapped is how much of the binary a quiet daemon may map again (a
	// poll's first read of the database after a while, an API call)
	// before it is unmapped again, at most every RetrimEvery.
	Remapped int64 = 2 << 20
	// RetrimEvery is how often at most a quiet daemon unmaps again what
	// came back.
	RetrimEvery = 30 * time.Second
)

// A Settler hands memory back once start-up is over, and again each time
// a busy spell ends: a burst fills the Go heap, the database's page caches
// and the binary's mapped pages, and a daemon that then sits idle for
// hours should not hold them. At each settling it calls Release (the
// caller forgets what it keeps only for speed and reads again when asked
// for), returns the freed heap to the system, calls Shrink (the database
// hands back its caches) and unmaps the binary's pages (Resident).
type Settler struct {
	// Transactions is how many write transactions the database has run.
	Transactions func() int64
	// Release and Shrink are called at each settling, before and after
	// the heap is returned.
	Release, Shrink func(ctx context.Context)
	// Settlings counts the times memory was handed back after a busy
	// spell; Retrims the times a quiet daemon unmapped the binary's pages
	// that came back.
	Settlings, Retrims atomic.Int64
}

// Run settles until ctx ends.
func (s *Settler) Run(ctx context.Context) {
	var (
		trimmedAt   time.Time
		trimmedSize int64
	)
	unmap := func() {
		Resident()
		trimmedAt, trimmedSize = time.Now(), FileResident()
	}
	select {
	case <-time.After(TrimAfter):
		unmap()
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(SettleEvery)
	defer t.Stop()
	// Start-up counts as a spell: what its last steps mapped again (the
	// first polls' statements, say) goes once the daemon is quiet.
	settled := s.Transactions() - BusySpell
	last := s.Transactions()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := s.Transactions()
		quiet := now-last <= quietWrites
		last = now
		if !quiet {
			continue
		}
		if now-settled < BusySpell {
			// Quiet, but no spell: unmap what was mapped again since.
			if time.Since(trimmedAt) >= RetrimEvery && FileResident()-trimmedSize >= Remapped {
				s.Retrims.Add(1)
				unmap()
			}
			continue
		}
		settled = now
		s.Settlings.Add(1)
		s.Release(ctx)
		debug.FreeOSMemory()
		s.Shrink(ctx)
		unmap()
	}
}
