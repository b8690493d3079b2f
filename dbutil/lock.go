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

// Modes of what parley keeps on disk: the database and its sidecar files
// hold every conversation, so only parley's own user may read them.
const (
	dataDirMode  = 0o700
	dataFileMode = 0o600
)

// LockSQLite takes an exclusive lock on a SQLite database, so two daemons
// never run on one file, however it is named: the lock is on the database
// file itself (its device and inode, the same through a symlink or a hard
// link) and on a sidecar lock file beside its real path (path + ".lock",
// symlinks resolved), where the holder's pid is written. It creates the
// database file (0600) and its directory (0700) when missing. release frees
// both; the locks die with the process.
func LockSQLite(path string) (release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), dataDirMode); err != nil {
		return nil, fmt.Errorf("create the directory of database.url: %w", err)
	}
	db, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, dataFileMode)
	if err != nil {
		return nil, fmt.Errorf("open database file %s: %w", path, err)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("resolve database file %s: %w", path, err)
	}
	// SQLite locks with fcntl, which flock does not touch.
	if err := syscall.Flock(int(db.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		db.Close()
		return nil, lockedError(real+".lock", path)
	}
	lockPath := real + ".lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, dataFileMode)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open lock file %s: %w", lockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		db.Close()
		return nil, lockedError(lockPath, path)
	}
	tightenModes(real)
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		_ = syscall.Flock(int(db.Fd()), syscall.LOCK_UN)
		db.Close()
	}, nil
}

// lockedError names the holder written in the lock file.
func lockedError(lockPath, path string) error {
	holder := "another process"
	if b, err := os.ReadFile(lockPath); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			holder = fmt.Sprintf("parley (pid %d)", pid)
		}
	}
	return fmt.Errorf("%w: %s is using %s; stop it first, or use a separate database.url", ErrLocked, holder, path)
}

// tightenModes makes a database made by an older parley (0644) and its
// sidecar files readable by parley's user only. SQLite gives a new WAL and
// shared-memory file the database file's mode.
func tightenModes(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal", path + ".lock"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			_ = os.Chmod(p, dataFileMode)
		}
	}
}
