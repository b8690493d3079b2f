//go:build !linux

package main

// trimResident is Linux-only (madvise MADV_PAGEOUT); elsewhere it does
// nothing.
func trimResident() {}
