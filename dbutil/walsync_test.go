package dbutil

import (
	"os"
	"testing"
)

// The syncer follows the log's path: SQLite removes the log when its last
// connection closes and creates another at the next write.
func TestWALSyncerFollowsTheLogsPath(t *testing.T) {
	path := t.TempDir() + "/x.db-wal"
	w := &walSyncer{path: path}
	defer w.close()
	if err := w.sync(); err != nil || w.f != nil {
		t.Fatalf("no log yet: err %v, open %v; want nothing to sync", err, w.f != nil)
	}
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.sync(); err != nil || w.f == nil {
		t.Fatalf("err %v, open %v; want the log synced", err, w.f != nil)
	}
	first := w.f
	if err := w.sync(); err != nil || w.f != first {
		t.Fatalf("err %v; the same log was opened again", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	cur, err := w.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(cur, fi) {
		t.Fatal("the syncer still holds the removed log, not the one at its path")
	}
}
