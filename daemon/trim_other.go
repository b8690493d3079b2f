//go:build !linux

package daemon

// trimResident is Linux-only (madvise MADV_PAGEOUT); elsewhere it does
// nothing.
func trimResident() {}
