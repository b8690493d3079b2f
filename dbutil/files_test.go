package dbutil_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// A password holding an @ (or another character the URL needs escaped) is
// refused as the driver would read it, and no error, from parsing or from
// opening, shows any part of it.
func TestPasswordWithAnAtIsNeverPrinted(t *testing.T) {
	for _, tc := range []struct{ url, password string }{
		{"postgres://bob:p4xq@ssw0rd-x@127.0.0.1:1/db?connect_timeout=1", "p4xq@ssw0rd-x"},
		{"postgres://bob:p4xq@ssqq/w0rd-x@127.0.0.1:1/db?connect_timeout=1", "p4xq@ssqq/w0rd-x"},
		{"postgres://bob:pazq@zzqq:w0rd@127.0.0.1:1/db?connect_timeout=1", "pazq@zzqq:w0rd"},
		{"postgresql://bob:q7zk@cr9k@t-99@127.0.0.1/db", "q7zk@cr9k@t-99"},
	} {
		t.Run(tc.password, func(t *testing.T) {
			_, perr := dbutil.ParseURL(tc.url)
			_, oerr := dbutil.Open(context.Background(), dbutil.Options{URL: tc.url})
			if perr == nil || oerr == nil || !strings.Contains(perr.Error(), "%40") {
				t.Fatalf("parse: %v; open: %v; want both refused, saying to escape @ as %%40", perr, oerr)
			}
			for _, part := range strings.FieldsFunc(tc.password, func(r rune) bool { return r == '@' || r == '/' || r == ':' }) {
				if len(part) < 4 {
					continue
				}
				for _, err := range []error{perr, oerr} {
					if strings.Contains(err.Error(), part) {
						t.Fatalf("%q of the password shows in: %v", part, err)
					}
				}
			}
		})
	}
	// Escaped, the same password is fine.
	if _, err := dbutil.ParseURL("postgres://bob:p4xq%40ssw0rd-x@127.0.0.1:5432/db"); err != nil {
		t.Fatalf("an escaped @: %v", err)
	}
}
