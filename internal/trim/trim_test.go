package trim

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssFile:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
		t.Skip("no RssFile in /proc/self/status")
		return 0
	}
	before := read()
	Resident()
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
	Resident()
	after := cached()
	if after < before*9/10 {
		t.Fatalf("the binary's pages in the page cache: %d before trimming, %d after", before, after)
	}
}

// Only the binary's read-only mappings are candidates.
func TestReadOnlyFileMappings(t *testing.T) {
	maps := `00400000-00800000 r-xp 00000000 fd:01 123 /opt/parley
00800000-00900000 r--p 00400000 fd:01 123 /opt/parley
00a00000-00b00000 rw-p 00600000 fd:01 123 /opt/parley
7f0000000000-7f0000100000 r--p 00000000 fd:01 456 /usr/lib/libc.so.6
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
`
	got := readOnlyFileMappings(strings.NewReader(maps), "/opt/parley")
	want := []mapping{{0x400000, 0x800000}, {0x800000, 0x900000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %x, want %x", got, want)
	}
}

// pageSink keeps the compiler from dropping a test's reads of a mapping.
var pageSink byte

// A read-only mapping that holds a private copy of a page (written while
// it was writable, as the dynamic loader writes relocations) is told
// apart from one that holds only the file's pages, so trimming never
// drops what was written.
func TestHoldsPrivatePages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skip("no /proc/self/pagemap here")
	}
	defer pagemap.Close()
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, make([]byte, 4*page), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapFile := func(t *testing.T) ([]byte, mapping) {
		b, err := unix.Mmap(int(f.Fd()), 0, 4*page, unix.PROT_READ, unix.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(b) })
		start := uintptr(unsafe.Pointer(&b[0]))
		return b, mapping{start, start + uintptr(len(b))}
	}

	clean, m := mapFile(t)
	pageSink = clean[page] + clean[3*page] // mapped, from the file
	if private, err := holdsPrivatePages(pagemap, m); err != nil || private {
		t.Fatalf("a mapping of the file's own pages: private = %v, %v", private, err)
	}

	written, m := mapFile(t)
	if err := unix.Mprotect(written, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		t.Fatal(err)
	}
	written[2*page] = 1
	if err := unix.Mprotect(written, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	if private, err := holdsPrivatePages(pagemap, m); err != nil || !private {
		t.Fatalf("a read-only mapping with a page written to: private = %v, %v", private, err)
	}
}

func TestStatmShared(t *testing.T) {
	if n := statmShared("5000 3000 1200 900 0 800 0\n"); n != 1200 {
		t.Fatalf("statmShared = %d", n)
	}
	if n := statmShared("5000"); n != 0 {
		t.Fatalf("statmShared of a short line = %d", n)
	}
}
