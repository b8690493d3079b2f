package config

import (
	"regexp"
	"strings"
	"testing"
)

// The ids checked by hand accept exactly what the regexps they replaced
// did.
func TestIDPatternsMatchTheirRegexps(t *testing.T) {
	inputs := []string{
		"", "a", "0", "main", "tg-main", "tg_main", "tg.main", "-main", "_main", ".main",
		"Main", "main!", "ma in", "mäin", "main\n", "\nmain", "a-", "a_", "a.",
		strings.Repeat("a", 32), strings.Repeat("a", 33), strings.Repeat("a", 64), strings.Repeat("a", 65),
		"a" + strings.Repeat("-", 63), "a" + strings.Repeat("-", 64),
	}
	for b := range 256 {
		inputs = append(inputs, string(rune(b)), "a"+string([]byte{byte(b)}), string([]byte{byte(b)})+"a")
	}
	for _, tc := range []struct {
		name string
		id   idPattern
		re   string
	}{
		{"agent", agentID, `^[a-z0-9][a-z0-9_-]{0,63}$`},
		{"adapter", adapterID, `^[a-z0-9][a-z0-9_.-]{0,63}$`},
		{"mcp", mcpID, `^[a-z0-9][a-z0-9_-]{0,31}$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			re := regexp.MustCompile(tc.re)
			for _, s := range inputs {
				if got, want := tc.id.MatchString(s), re.MatchString(s); got != want {
					t.Errorf("%q: %v, the regexp says %v", s, got, want)
				}
			}
		})
	}
}
