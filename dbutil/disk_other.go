//go:build !unix

package dbutil

// Disk reports nothing where the system call it needs is missing.
func (d *DB) Disk() (free, size uint64, ok bool) { return 0, 0, false }
