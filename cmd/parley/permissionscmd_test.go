package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/permissions"
)

// The "Always" answers stored are listed, filtered, and revoked.
func TestPermissionsCommands(t *testing.T) {
	ctx := context.Background()
	path, _ := writeConfig(t, "")
	cfg, _, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	db, _, err := daemon.OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	st := permissions.NewStore(db)
	for _, g := range [][3]string{{"default", "telegram:1", "gh__list"}, {"default", "telegram:2", "gh__search"}} {
		if err := st.GrantProject(ctx, g[0], g[1], g[2]); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if c, out, errOut := parley(t, ctx, "permissions", "ls", "--config", path); c != 0 || !strings.Contains(out, "telegram:1") ||
		!strings.Contains(out, "gh__search") || !strings.Contains(out, "allow") {
		t.Fatalf("ls: exit %d %q %q", c, out, errOut)
	}
	if c, out, _ := parley(t, ctx, "permissions", "ls", "--user", "telegram:2", "--config", path); c != 0 || strings.Contains(out, "gh__list") || !strings.Contains(out, "gh__search") {
		t.Fatalf("ls --user: exit %d %q", c, out)
	}
	if c, out, errOut := parley(t, ctx, "permissions", "revoke", "default", "telegram:1", "gh__list", "--config", path); c != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: exit %d %q %q", c, out, errOut)
	}
	if c, _, errOut := parley(t, ctx, "permissions", "revoke", "default", "telegram:1", "gh__list", "--config", path); c != 1 || !strings.Contains(errOut, "parley permissions ls") {
		t.Fatalf("revoke twice: exit %d %q", c, errOut)
	}
	if c, _, errOut := parley(t, ctx, "permissions", "revoke", "default", "--config", path); c != 2 || !strings.Contains(errOut, "takes 3 argument(s)") {
		t.Fatalf("revoke without a tool: exit %d %q", c, errOut)
	}
}
