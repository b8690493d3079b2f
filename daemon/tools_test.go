package daemon

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/tools"
)

// Every built-in tool config check knows is one the start accepts.
func TestBuiltinToolNamesStart(t *testing.T) {
	names, err := tools.BuiltinNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"memory_write", "memory_search", "schedule_create", "schedule_list", "schedule_delete", "sessions_spawn"} {
		if !slices.Contains(names, n) {
			t.Errorf("tools.BuiltinNames() = %q, missing %s", names, n)
		}
	}
	path, _ := writeConfig(t, "agents:\n  - id: default\n    tools: ["+strings.Join(names, ", ")+"]\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := build(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatalf("start with every built-in tool: %v", err)
	}
	d.Close()
	// The example lists them for the reader.
	example, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.Contains(string(example), n) {
			t.Errorf("config.example.yaml does not name the tool %s", n)
		}
	}
}
