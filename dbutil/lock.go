package dbutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked means another parley process holds the SQLite database.
var ErrLocked = errors.New("database is in use by another parley process")

// LockSQLite takes an exclusive lock on a SQLite database's sidecar lock
// file (path + ".lock"), so two daemons never run on one file. It writes the
// holder's pid there; release frees it. The lock dies with the process.
func LockSQLite(path string) (release func(), err error) {
	lockPath := path + ".lock"
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create the directory of database.url: %w", err)
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", lockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(lockPath); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf("parley (pid %d)", pid)
			}
		}
		f.Close()
		return nil, fmt.Errorf("%w: %s is using %s; stop it first, or use a separate database.url", ErrLocked, holder, path)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
