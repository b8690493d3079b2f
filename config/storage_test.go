package config

import (
	"strings"
	"testing"
	"time"
)

func TestSessionStorageClientToolsAndSkills(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		check      func(c *Config) bool
		problem    string
	}{
		{"defaults", "", func(c *Config) bool {
			return c.Sessions.KV == SessionKV{MaxValueBytes: 64 << 10, MaxSessionBytes: 1 << 20, MaxKeys: 1000} &&
				c.Sessions.ClientTools.Timeout.Std() == 5*time.Minute && c.Skills.Dirs == nil
		}, ""},
		{"set", "sessions:\n  kv:\n    max_value_bytes: 100\n    max_session_bytes: 1000\n    max_keys: 5\n  client_tools:\n    timeout: 30s\nskills:\n  dirs: [' /srv/skills ']\n",
			func(c *Config) bool {
				return c.Sessions.KV == SessionKV{MaxValueBytes: 100, MaxSessionBytes: 1000, MaxKeys: 5} &&
					c.Sessions.ClientTools.Timeout.Std() == 30*time.Second && len(c.Skills.Dirs) == 1 && c.Skills.Dirs[0] == "/srv/skills"
			}, ""},
		{"explicit zero", "sessions:\n  kv:\n    max_keys: 0\n", nil, "sessions.kv.max_keys: 0 is out of range; use 1-100000"},
		{"value too big", "sessions:\n  kv:\n    max_value_bytes: 20000000\n", nil, "sessions.kv.max_value_bytes: 20000000 is out of range"},
		{"session below a value", "sessions:\n  kv:\n    max_value_bytes: 2000\n    max_session_bytes: 1000\n", nil,
			"sessions.kv.max_session_bytes: 1000 is below max_value_bytes (2000)"},
		{"timeout too short", "sessions:\n  client_tools:\n    timeout: 100ms\n", nil, "sessions.client_tools.timeout: 100ms is out of range; use a duration from 1s to 1h"},
		{"timeout zero", "sessions:\n  client_tools:\n    timeout: 0s\n", nil, "sessions.client_tools.timeout: 0s is out of range"},
		{"blank skills folder", "skills:\n  dirs: ['']\n", nil, "skills.dirs[0]: is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "parley.yaml", nil)
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("err %v, want %q", err, tc.problem)
				}
				return
			}
			if err != nil || !tc.check(c) {
				t.Fatalf("%+v %+v %v", c.Sessions, c.Skills, err)
			}
		})
	}
}
