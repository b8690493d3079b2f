//go:build unix

package dbutil

import (
	"path/filepath"
	"syscall"
)

// Disk reports the bytes free (to an unprivileged writer) and in all on
// the disk SQLite's file is on; ok is false on PostgreSQL, whose disk is
// not this host's, or when the system can't say.
func (d *DB) Disk() (free, size uint64, ok bool) {
	if d.path == "" {
		return 0, 0, false
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(d.path), &fs); err != nil {
		return 0, 0, false
	}
	return fs.Bavail * uint64(fs.Bsize), fs.Blocks * uint64(fs.Bsize), true
}
