package config

import (
	"strings"
	"testing"
)

// An unknown key close to a known one is answered with it; one near none,
// or as near two, gets no guess.
func TestUnknownKeysSuggestTheNearest(t *testing.T) {
	top := []string{"database", "http", "log", "agents", "providers", "gateway", "bindings", "memory", "adapters", "hooks", "mcp", "budgets", "cron"}
	for _, c := range []struct {
		key   string
		names []string
		want  string
	}{
		{"htpp", top, "http"},        // two letters swapped
		{"databse", top, "database"}, // one dropped
		{"adapter", top, "adapters"}, // one missing at the end
		{"agnets", top, "agents"},    // swapped
		{"providres", top, "providers"},
		{"lgo", top, "log"},
		{"telemetry", top, ""}, // nothing near
		{"x", top, ""},
		{"ab", []string{"ac", "ad"}, ""}, // as near two
		{"Http", top, "http"},
	} {
		if got := suggest(c.key, c.names); got != c.want {
			t.Errorf("suggest(%q) = %q; want %q", c.key, got, c.want)
		}
	}
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"", "abc", 3}, {"htpp", "http", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3}, {"héllo", "hello", 1}} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d; want %d", c.a, c.b, got, c.want)
		}
	}
	_, err := Parse([]byte("htpp:\n  listen: \":8080\"\n"), "parley.yaml", func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), `unknown key "htpp"; did you mean "http"?`) {
		t.Fatalf("a config with htpp: %v", err)
	}
}
