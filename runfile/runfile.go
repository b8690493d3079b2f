// Package runfile is where a running daemon records its address, for
// `parley chat`, `parley ask`, `parley status` and `parley reload` to find
// it.
package runfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
)

// Path is where a daemon on cfg records its address while it runs: beside
// a SQLite database, or in the user's runtime (or temporary) directory for
// PostgreSQL.
func Path(cfg *config.Config) string {
	if t, err := dbutil.ParseURL(cfg.Database.URL.Reveal()); err == nil && t.Dialect == dbutil.SQLite {
		return filepath.Join(filepath.Dir(t.Path), "parley.run.json")
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "parley-"+cfg.Gateway.ReplicaID+".run.json")
}

// Running is what a daemon's run file says.
type Running struct {
	PID     int       `json:"pid"`
	Listen  string    `json:"listen"`
	Version string    `json:"version"`
	Started time.Time `json:"started"`
}

// Read reads the run file of a daemon on cfg; ok is false when none runs
// (no file, or its process is gone).
func Read(cfg *config.Config) (Running, bool) {
	b, err := os.ReadFile(Path(cfg))
	if err != nil {
		return Running{}, false
	}
	var r Running
	if json.Unmarshal(b, &r) != nil || r.Listen == "" || r.PID <= 0 {
		return Running{}, false
	}
	if p, err := os.FindProcess(r.PID); err != nil || p.Signal(syscall.Signal(0)) != nil {
		return Running{}, false
	}
	return r, true
}

// Write records r at path, whole or not at all.
func Write(path string, r Running) error {
	b, _ := json.Marshal(r)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Remove removes the run file at path if it is still r's (another daemon,
// a replica on the same host, may have written it since).
func Remove(path string, r Running) {
	var got Running
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &got) == nil && got.PID == r.PID && got.Listen == r.Listen {
		_ = os.Remove(path)
	}
}
