package dbutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// walSyncer fsyncs a SQLite database's write-ahead log, the file its
// writer appends each commit to. It keeps the file open, and opens it again
// when the path names another file: SQLite deletes the log when its last
// connection closes (after copying every commit into the database and
// syncing that) and creates a new one at the next write.
type walSyncer struct {
	path string
	f    *os.File
}

func (w *walSyncer) sync() error {
	fi, err := os.Stat(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		// No log: whatever was committed is in the database file,
		// which SQLite synced before it removed the log.
		w.close()
		return nil
	}
	if err != nil {
		return err
	}
	if w.f != nil {
		if cur, err := w.f.Stat(); err != nil || !os.SameFile(cur, fi) {
			w.close()
		}
	}
	if w.f == nil {
		if w.f, err = os.Open(w.path); err != nil {
			w.f = nil
			return err
		}
	}
	if err := datasync(w.f); err != nil {
		return fmt.Errorf("%w %s: %w", errFsync, w.path, err)
	}
	return nil
}

// errFsync marks a failed fsync, as opposed to a failure to reach the file.
var errFsync = errors.New("fsync")

func (w *walSyncer) close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}
