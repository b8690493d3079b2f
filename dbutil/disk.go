package dbutil

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DiskSpace reports the bytes free (to an unprivileged writer) and in all
// on the filesystem dir is on.
func DiskSpace(dir string) (free, size uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// Disk is DiskSpace of the directory SQLite's file is in; ok is false on
// PostgreSQL, whose disk is not this host's, or when the system can't say.
func (d *DB) Disk() (free, size uint64, ok bool) {
	if d.path == "" {
		return 0, 0, false
	}
	free, size, err := DiskSpace(filepath.Dir(d.path))
	return free, size, err == nil
}
