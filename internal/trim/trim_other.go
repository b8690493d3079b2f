//go:build !linux

package trim

// Resident is Linux-only (madvise MADV_DONTNEED); elsewhere it does
// nothing.
func Resident() {}

// FileResident is Linux-only; elsewhere it says 0.
func FileResident() int64 { return 0 }
