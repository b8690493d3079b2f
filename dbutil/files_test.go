package dbutil_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/parleyd/parley/dbutil"
)

// A second daemon reaching the same SQLite file by another name (a
// symlink to the file, a symlinked directory, a hard link) finds it locked.
func TestLockSQLiteFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data", "parley.db")
	release, err := dbutil.LockSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600); err == nil { // as the daemon's open would
		f.Close()
	}
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	fileLink := filepath.Join(other, "link.db")
	dirLink := filepath.Join(dir, "data-link")
	hardLink := filepath.Join(other, "hard.db")
	if err := os.Symlink(path, fileLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "data"), dirLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(path, hardLink); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{fileLink, filepath.Join(dirLink, "parley.db"), hardLink} {
		if rel, err := dbutil.LockSQLite(name); !errors.Is(err, dbutil.ErrLocked) {
			if err == nil {
				rel()
			}
			t.Errorf("lock through %s: %v, want ErrLocked", name, err)
		}
	}
}

// The database, its WAL, shared-memory and lock files are 0600 and a data
// directory parley makes is 0700, whatever the umask lets through; a
// database an older parley left 0644 is tightened.
func TestSQLiteFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "parley.db")
	release, err := dbutil.LockSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	db, err := dbutil.Open(context.Background(), dbutil.Options{URL: path})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Write().ExecContext(context.Background(), "CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{dir: 0o700, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600, path + ".lock": 0o600}
	for p, mode := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s is %o, want %o", filepath.Base(p), fi.Mode().Perm(), mode)
		}
	}

	// An older parley's 0644 database.
	oldPath := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(oldPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	db2, err := dbutil.Open(context.Background(), dbutil.Options{URL: oldPath})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if fi, _ := os.Stat(oldPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("an old database stays %o", fi.Mode().Perm())
	}
}
