package daemon

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// trimResident unmaps the binary's code and read-only pages that start-up
// touched and an idle daemon doesn't use: package initialization in the
// channel and protocol libraries, and the kernel's fault-around (each fault
// on a file maps the 64 KiB around it), leave about 25 MB of the binary
// mapped. They are clean pages of the file, so MADV_DONTNEED only drops
// this process's mappings: the pages stay in the page cache, shared with
// the next start of the same file (a restart is as fast as ever; paging
// them out, MADV_PAGEOUT, made it 8-12 ms slower), and a page needed later
// is mapped again from the cache on first use. Writable mappings (the
// binary's data) are never touched.
func trimResident() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	defer f.Close()
	for _, m := range readOnlyFileMappings(f, exe) {
		_ = unix.Madvise(unsafeSlice(m.start, int(m.end-m.start)), unix.MADV_DONTNEED)
	}
}

// fileResident is how many bytes of files the process has mapped in
// memory (its binary's pages, above all), from /proc/self/statm; 0 when
// it can't say.
func fileResident() int64 {
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

// readOnlyFileMappings lists, from /proc/self/smaps text, exe's mappings
// that are not writable and hold no page of this process's own: a
// read-only mapping can hold private copies (the dynamic loader's
// relocations in a binary linked with libc, made read-only afterwards),
// and dropping those would lose what was written to them.
func readOnlyFileMappings(smaps io.Reader, exe string) []mapping {
	var out []mapping
	var cur mapping
	keep := false
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && len(fields) >= 5 {
			// A mapping's header: address range, permissions, offset,
			// device, inode and path.
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			keep = err1 == nil && err2 == nil && end > start && len(fields) >= 6 &&
				fields[5] == exe && !strings.Contains(fields[1], "w")
			cur = mapping{uintptr(start), uintptr(end)}
			continue
		}
		if fields[0] == "Anonymous:" && keep {
			if len(fields) >= 2 && fields[1] == "0" {
				out = append(out, cur)
			}
			keep = false
		}
	}
	return out
}

// unsafeSlice views a mapped range of this process's memory as a slice,
// for madvise.
func unsafeSlice(addr uintptr, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(nil, addr)), n)
}
