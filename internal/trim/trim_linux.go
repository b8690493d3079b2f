// Package trim hands back to the kernel the pages of parley's binary that
// start-up touched and an idle daemon doesn't use.
package trim

import (
	"bufio"
	"encoding/binary"
	"io"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Resident unmaps the binary's code and read-only pages that start-up
// touched and an idle daemon doesn't use: package initialization in the
// channel and protocol libraries, and the kernel's fault-around (each fault
// on a file maps the 64 KiB around it), leave tens of megabytes of the
// binary mapped. They are clean pages of the file, so MADV_DONTNEED only drops
// this process's mappings: the pages stay in the page cache, shared with
// the next start of the same file (a restart is as fast as ever; paging
// them out, MADV_PAGEOUT, would slow it), and a page needed later
// is mapped again from the cache on first use. Writable mappings (the
// binary's data) are never touched.
func Resident() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	candidates := readOnlyFileMappings(maps, exe)
	maps.Close()
	// /proc/self/maps and pagemap, not smaps: smaps walks every page of
	// every mapping (the Go heap's too) to count it, which cost more than
	// the unmapping itself.
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return
	}
	defer pagemap.Close()
	for _, m := range candidates {
		if private, err := holdsPrivatePages(pagemap, m); err != nil || private {
			continue
		}
		_ = unix.Madvise(unsafeSlice(m.start, int(m.end-m.start)), unix.MADV_DONTNEED)
	}
}

// FileResident is how many bytes of files the process has mapped in
// memory (its binary's pages, above all), from /proc/self/statm; 0 when
// it can't say.
func FileResident() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	return statmShared(string(b)) * int64(os.Getpagesize())
}

// statmShared is the third field of /proc/PID/statm: resident pages backed
// by a file.
func statmShared(statm string) int64 {
	f := strings.Fields(statm)
	if len(f) < 3 {
		return 0
	}
	n, _ := strconv.ParseInt(f[2], 10, 64)
	return n
}

type mapping struct{ start, end uintptr }

// readOnlyFileMappings lists, from /proc/self/maps text, exe's mappings
// that are not writable.
func readOnlyFileMappings(maps io.Reader, exe string) []mapping {
	var out []mapping
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// Address range, permissions, offset, device, inode and path.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && end > start {
			out = append(out, mapping{uintptr(start), uintptr(end)})
		}
	}
	return out
}

// Bits of a /proc/PID/pagemap entry.
const (
	pagePresent    = 1 << 63
	pageFileShared = 1 << 61 // a page of the file (or shared memory), not a private copy
)

// holdsPrivatePages reports whether m, a private mapping of a file, holds
// a page of this process's own: a copy made by writing to it, as the
// dynamic loader does to relocations in a binary linked with libc before
// it makes them read-only (or a debugger's breakpoint). Dropping such a
// page would lose what was written to it. pagemap is
// /proc/self/pagemap, one 8-byte entry per page.
func holdsPrivatePages(pagemap io.ReaderAt, m mapping) (bool, error) {
	page := uintptr(os.Getpagesize())
	buf := make([]byte, 8*1024)
	for addr := m.start; addr < m.end; {
		n := min(int((m.end-addr)/page)*8, len(buf))
		if n == 0 {
			return false, nil
		}
		if _, err := pagemap.ReadAt(buf[:n], int64(addr/page)*8); err != nil {
			return false, err
		}
		for i := 0; i < n; i += 8 {
			if e := binary.NativeEndian.Uint64(buf[i:]); e&pagePresent != 0 && e&pageFileShared == 0 {
				return true, nil
			}
		}
		addr += uintptr(n/8) * page
	}
	return false, nil
}

// unsafeSlice views a mapped range of this process's memory as a slice,
// for madvise.
func unsafeSlice(addr uintptr, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(nil, addr)), n)
}
