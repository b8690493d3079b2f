package section

import (
	"slices"
	"testing"
	"time"
)

func TestJoin(t *testing.T) {
	for _, tc := range []struct{ prefix, key, want string }{
		{"", "speech", "speech"},
		{"speech", "max_bytes", "speech.max_bytes"},
		{"agents[0]", "", "agents[0]"},
		{"agents", "[1]", "agents[1]"},
		{"mcp.servers[0]", "retry.attempts", "mcp.servers[0].retry.attempts"},
	} {
		if got := Join(tc.prefix, tc.key); got != tc.want {
			t.Errorf("Join(%q, %q) = %q, want %q", tc.prefix, tc.key, got, tc.want)
		}
	}
}

// Default fills a zero value the file left out, and keeps an explicit
// zero and any other value.
func TestDefault(t *testing.T) {
	set := NewSet("speech", func(k string) bool { return k == "speech.max_seconds" })
	var absent, explicit, given = 0, 0, 5
	Default(&absent, set, "max_bytes", 9)
	Default(&explicit, set, "max_seconds", 9)
	Default(&given, set, "timeout", 9)
	if absent != 9 || explicit != 0 || given != 5 {
		t.Errorf("absent %d, explicit %d, given %d; want 9, 0, 5", absent, explicit, given)
	}
	var d Duration
	Default(&d, Set{}, "timeout", Duration(time.Minute))
	if d.Std() != time.Minute {
		t.Errorf("the zero Set: %s, want 1m0s", d)
	}
	if (Set{}).Has("anything") {
		t.Error("the zero Set has a key")
	}
}

func TestPrefixed(t *testing.T) {
	var l List
	r := Prefixed(Prefixed(&l, "agents[0]"), "compaction")
	r.Add("tail_turns", "out of range")
	r.Add("", "the section itself")
	Prefixed(&l, "").Add("log.level", "bad")
	if want := []string{"agents[0].compaction.tail_turns", "agents[0].compaction", "log.level"}; !slices.Equal(l.Keys(), want) {
		t.Errorf("keys %v, want %v", l.Keys(), want)
	}
}

func TestNormalize(t *testing.T) {
	if got := Normalize("  JSON ", "text"); got != "json" {
		t.Errorf("Normalize = %q", got)
	}
	if got := Normalize(" ", "text"); got != "text" {
		t.Errorf("Normalize of blank = %q", got)
	}
}
