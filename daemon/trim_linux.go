package daemon

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// trimResident hands back the binary's code and read-only pages that
// start-up touched and an idle daemon doesn't use: package initialization
// in the provider and channel SDKs pulls in megabytes of them. They are
// clean file-backed pages, so the kernel only unmaps them; a page needed
// later is mapped again from the page cache on first use.
func trimResident() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
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
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_ = unix.Madvise(unsafeSlice(uintptr(start), int(end-start)), unix.MADV_PAGEOUT)
	}
}

// unsafeSlice views a mapped range of this process's memory as a slice,
// for madvise.
func unsafeSlice(addr uintptr, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(nil, addr)), n)
}
