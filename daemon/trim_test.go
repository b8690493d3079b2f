package daemon

import (
	"os"
	"testing"
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
