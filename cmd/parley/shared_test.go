package main

import "strings"

// The secrets the process tests' configs use: each long enough for the
// start's strength checks.
const (
	apiToken   = "test-token-0123456789abcdef0123456789"
	hookSecret = "0123456789abcdef0123456789abcdef-hook"
)

func indentYAML(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
