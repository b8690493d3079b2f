//go:build !linux

package daemon

// trimResident is Linux-only (madvise MADV_DONTNEED); elsewhere it does
// nothing.
func trimResident() {}

// fileResident is Linux-only; elsewhere it says 0.
func fileResident() int64 { return 0 }
