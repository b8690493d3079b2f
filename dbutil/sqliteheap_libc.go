//go:build linux && (amd64 || arm64 || loong64 || ppc64le || s390x || riscv64 || 386 || arm) && !libc.membrk && !libc.memgrind

package dbutil

import (
	"sync"
	_ "unsafe" // for go:linkname

	"modernc.org/memory"
)

// SQLite's C heap, in the pure-Go SQLite parley builds with, is one
// modernc.org/memory allocator inside modernc.org/libc. It keeps the
// regions a busy spell freed (up to 4 MiB of each size class, resident)
// for reuse, and libc offers no call that hands them back: after a burst
// they are a large share of an idle daemon's resident set. These two names are
// libc's own (v1.78, pinned with SQLite in go.mod);
// TestTrimSQLiteHeapHandsMemoryBack fails if they stop naming its
// allocator.
//
//go:linkname libcAllocator modernc.org/libc.allocator
var libcAllocator memory.Allocator

//go:linkname libcAllocatorMu modernc.org/libc.allocatorMu
var libcAllocatorMu sync.Mutex

// trimsSQLiteHeap says trimSQLiteHeap hands memory back on this build.
const trimsSQLiteHeap = true

// trimSQLiteHeap unmaps the empty regions SQLite's allocator retains.
// Regions still holding an allocation stay.
func trimSQLiteHeap() error {
	libcAllocatorMu.Lock()
	defer libcAllocatorMu.Unlock()
	return libcAllocator.Trim()
}
