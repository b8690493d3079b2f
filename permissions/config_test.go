package permissions

import (
	"slices"
	"testing"
	"time"

	"github.com/parleyd/parley/config/section"
)

// The permissions section: the ask timeout's default, and each bad value
// a problem naming its key.
func TestConfigCheck(t *testing.T) {
	var c Config
	c.SetDefaults(section.Set{})
	if c.AskTimeout.Std() != DefaultAskTimeout {
		t.Fatalf("ask_timeout %s, want %s", c.AskTimeout, DefaultAskTimeout)
	}
	for _, tc := range []struct {
		name string
		c    Config
		want []string
	}{
		{"good", Config{AskTimeout: section.Duration(time.Minute), Rules: []ConfigProjectRule{{User: "telegram:1", Tool: "x", Action: "ALLOW"}}}, nil},
		{"ask timeout", Config{AskTimeout: section.Duration(48 * time.Hour)}, []string{"ask_timeout"}},
		{"user and action", Config{AskTimeout: 1, Rules: []ConfigProjectRule{{}, {User: "1", Tool: "x", Action: "maybe"}}},
			[]string{"rules[0].action", "rules[1].user", "rules[1].action"}},
		{"tool", Config{AskTimeout: 1, Rules: []ConfigProjectRule{{Tool: "a b", Action: "deny"}}}, []string{"rules[0].tool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l section.List
			tc.c.Check(&l)
			if !slices.Equal(l.Keys(), tc.want) {
				t.Errorf("problems at %v, want %v: %v", l.Keys(), tc.want, l)
			}
		})
	}

	var l section.List
	ConfigRule{Tool: "mcp:gh/", Action: "allow"}.Check(&l)
	CheckAllowTools(&l, "allow_tools", []string{"ok", "a b"})
	if want := []string{"tool", "allow_tools[1]"}; !slices.Equal(l.Keys(), want) {
		t.Errorf("problems at %v, want %v: %v", l.Keys(), want, l)
	}
}
