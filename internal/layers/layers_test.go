package layers

import (
	"os/exec"
	"strings"
	"testing"
)

// floorOf is the floor of a package path inside the module (without the
// module prefix), by its nearest listed folder; -1 when unplaced.
func floorOf(pkg string) int {
	best, floor := -1, -1
	for i, names := range Floors {
		for _, n := range names {
			if (pkg == n || strings.HasPrefix(pkg, n+"/")) && len(n) > best {
				best, floor = len(n), i
			}
		}
	}
	return floor
}

// No package imports one on a floor above its own, and every package has
// a floor.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], Module), "/")
		if pkg == "internal/layers" {
			continue
		}
		from := floorOf(pkg)
		if from < 0 {
			t.Errorf("package %s has no floor: add it to layers.Floors", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			rest, ok := strings.CutPrefix(imp, Module+"/")
			if !ok {
				continue
			}
			if to := floorOf(rest); to > from {
				t.Errorf("%s (floor %d) imports %s (floor %d): a lower floor may not import a higher one", pkg, from, rest, to)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("go list named no imports between parley's packages")
	}
}

// The floors are read the way the test reads them.
func TestFloorOf(t *testing.T) {
	for _, tc := range []struct {
		pkg  string
		want int
	}{
		{"internal/sleep", 0}, {"adapters", 2}, {"adapters/telegram/telegramtest", 4}, {"adapters/adapterstest", 2},
		{"llm/openai", 1}, {"cmd/parley", 6}, {"nowhere", -1},
	} {
		if got := floorOf(tc.pkg); got != tc.want {
			t.Errorf("floorOf(%q) = %d, want %d", tc.pkg, got, tc.want)
		}
	}
}
