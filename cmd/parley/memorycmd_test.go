package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
)

func TestMemoryReindex(t *testing.T) {
	ctx := context.Background()
	path, _ := writeConfig(t, "")
	code, out, errOut := parley(t, ctx, "memory", "reindex", "--config", path)
	if code != 0 || !strings.Contains(out, "reindexed 0 memory items into the builtin index") {
		t.Fatalf("exit %d: %q %q", code, out, errOut)
	}

	// A memory written by a daemon is found again after a rebuild.
	cfg, _, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	mem, closeMem := openMemory(t, ctx, cfg)
	scope := memory.ScopeOf(sessions.ChatKey("telegram", "42", "7", config.DefaultAgentID))
	if _, err := mem.Write(ctx, scope, memory.Memory{Content: "the milk is in the blue fridge"}); err != nil {
		t.Fatal(err)
	}
	closeMem()

	code, out, errOut = parley(t, ctx, "memory", "reindex", "--config", path)
	if code != 0 || !strings.Contains(out, "reindexed 1 memory items") {
		t.Fatalf("exit %d: %q %q", code, out, errOut)
	}
	mem, closeMem = openMemory(t, ctx, cfg)
	defer closeMem()
	hits, err := mem.Search(ctx, scope, "fridge", 5)
	if err != nil || len(hits) != 1 {
		t.Fatalf("search after reindex: %v %v", hits, err)
	}

	if code, _, errOut := parley(t, ctx, "memory", "forget"); code != 2 || !strings.Contains(errOut, "subcommands are reindex") {
		t.Fatalf("unknown subcommand: exit %d, %q", code, errOut)
	}
}

// An agent naming a tool that does not exist stops the start with the
// names that do.
func TestUnknownToolStopsTheStart(t *testing.T) {
	path, _ := writeConfig(t, "agents:\n  - id: a\n    tools: [memory_search, web_search]\n")
	code, _, errOut := parley(t, context.Background(), "memory", "reindex", "--config", path)
	if code != 1 || !strings.Contains(errOut, `agents[0].tools[1]: no tool is called "web_search"; the tools are file_delete, file_list, file_read, file_write, kv_delete, kv_get, kv_list, kv_set, memory_search, memory_write`) {
		t.Fatalf("exit %d: %q", code, errOut)
	}
}

// openMemory opens the configured database's memory on the built-in index,
// as the daemon does.
func openMemory(t *testing.T, ctx context.Context, cfg *config.Config) (*memory.Store, func()) {
	t.Helper()
	db, _, err := daemon.OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	index, err := memory.NewBuiltin(ctx, db)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return memory.NewStore(db, index), func() { db.Close() }
}
