package daemon

import (
	"path/filepath"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/httpserve"
)

// readyOptions are the daemon's: its log, its API tokens, and its SQLite
// directory with database.sqlite.min_free_mb.
func (d *Daemon) readyOptions() httpserve.ReadyOptions {
	o := httpserve.ReadyOptions{Log: d.named("health"), DiskFree: httpserve.DiskFree, MCPDown: d.mcp.Down, Elsewhere: d.runElsewhere}
	for _, t := range d.cfg().HTTP.Tokens {
		o.Tokens = append(o.Tokens, t.Reveal())
	}
	if t, err := dbutil.ParseURL(d.cfg().Database.URL.Reveal()); err == nil && t.Dialect == dbutil.SQLite && d.cfg().Database.SQLite.MinFreeMB > 0 {
		o.DataDir, o.MinFree = filepath.Dir(t.Path), uint64(d.cfg().Database.SQLite.MinFreeMB)<<20
	}
	return o
}
