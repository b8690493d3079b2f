package daemon

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Trimming hands back the code pages this process touched: its file-backed
// resident set falls.
func TestTrimResidentHandsPagesBack(t *testing.T) {
	read := func() float64 {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Skip("no /proc here")
		}
		return statusMB(string(b), "RssFile:")
	}
	before := read()
	trimResident()
	after := read()
	if after >= before {
		t.Fatalf("RssFile %.1f MB before, %.1f MB after", before, after)
	}
}

// Trimming leaves the binary in the page cache: the next start of the same
// file finds it there (paging it out made every restart slower).
func TestTrimKeepsTheBinaryCached(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cached := func() int {
		f, err := os.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	// A binary just built is still being written back; written, its pages
	// are clean and could be paged out, as an installed binary's are.
	if f, err := os.Open(exe); err == nil {
		_ = f.Sync()
		f.Close()
	}
	before := cached()
	trimResident()
	after := cached()
	if after < before*9/10 {
		t.Fatalf("the binary's pages in the page cache: %d before trimming, %d after", before, after)
	}
}

// Only read-only mappings of the binary that hold no private copy are
// dropped.
func TestReadOnlyFileMappings(t *testing.T) {
	smaps := `00400000-00800000 r-xp 00000000 fd:01 123 /opt/parley
Size:               4096 kB
Anonymous:             0 kB
00800000-00900000 r--p 00400000 fd:01 123 /opt/parley
Anonymous:             8 kB
00900000-00a00000 r--p 00500000 fd:01 123 /opt/parley
Anonymous:             0 kB
00a00000-00b00000 rw-p 00600000 fd:01 123 /opt/parley
Anonymous:             0 kB
7f0000000000-7f0000100000 r--p 00000000 fd:01 456 /usr/lib/libc.so.6
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
Anonymous:           100 kB
`
	got := readOnlyFileMappings(strings.NewReader(smaps), "/opt/parley")
	want := []mapping{{0x400000, 0x800000}, {0x900000, 0xa00000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %x, want %x", got, want)
	}
}
