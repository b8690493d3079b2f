package dbutil

import (
	"os"
	"syscall"
)

// datasync flushes f's data to disk, and the metadata needed to read it
// back (its size), as SQLite does on Linux.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
