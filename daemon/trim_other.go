//go:build !linux

package daemon

// trimResident is Linux-only (madvise MADV_DONTNEED); elsewhere it does
// nothing.
func trimResident() {}
