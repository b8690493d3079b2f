//go:build !(linux && (amd64 || arm64 || loong64 || ppc64le || s390x || riscv64 || 386 || arm) && !libc.membrk && !libc.memgrind)

package dbutil

// trimsSQLiteHeap says trimSQLiteHeap hands memory back on this build.
const trimsSQLiteHeap = false

// trimSQLiteHeap does nothing where modernc.org/libc builds its allocator
// otherwise (see sqliteheap_libc.go).
func trimSQLiteHeap() error { return nil }
