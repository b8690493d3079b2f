package config

import (
	"strings"
	"testing"
	"time"
)

func TestSessionsPruneArchivedAfter(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       time.Duration
		problem    string
	}{
		{"off by default", "", 0, ""},
		{"30 days", "sessions:\n  prune_archived_after: 720h\n", 720 * time.Hour, ""},
		{"too short", "sessions:\n  prune_archived_after: 30m\n", 0, "sessions.prune_archived_after: 30m0s is out of range"},
		{"negative", "sessions:\n  prune_archived_after: -1h\n", 0, "sessions.prune_archived_after: -1h0m0s is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "parley.yaml", nil)
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("err %v, want %q", err, tc.problem)
				}
				return
			}
			if err != nil || c.Sessions.PruneArchivedAfter.Std() != tc.want {
				t.Fatalf("%v %v, want %s", c.Sessions.PruneArchivedAfter, err, tc.want)
			}
		})
	}
}
