package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/gateway"
)

func TestPairingCommands(t *testing.T) {
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
	code, err := gateway.NewStore(db, nil).RequestPairing(ctx, adapters.Inbound{Adapter: "tg-main", Surface: "telegram",
		ChatID: "77", UserID: "77", DisplayName: "Ann", MessageID: "1", Text: "hi", Time: time.Now()})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	code2, out, errOut := parley(t, ctx, "pairing", "ls", "--config", path)
	if code2 != 0 || !strings.Contains(out, code) || !strings.Contains(out, "Ann") || !strings.Contains(out, "tg-main") {
		t.Fatalf("ls: exit %d %q %q", code2, out, errOut)
	}
	if c, out, errOut := parley(t, ctx, "pairing", "approve", strings.ToLower(code), "--config", path); c != 0 || !strings.Contains(out, "approved Ann (77) on tg-main") {
		t.Fatalf("approve: exit %d %q %q", c, out, errOut)
	}
	if c, _, errOut := parley(t, ctx, "pairing", "approve", code, "--config", path); c != 1 || !strings.Contains(errOut, "approved already") {
		t.Fatalf("second approve: exit %d %q", c, errOut)
	}
	if c, _, errOut := parley(t, ctx, "pairing", "approve", "NOPE2345", "--config", path); c != 1 || !strings.Contains(errOut, "parley pairing ls") {
		t.Fatalf("unknown code: exit %d %q", c, errOut)
	}
	if c, out, _ := parley(t, ctx, "pairing", "ls", "--config", path); c != 0 || !strings.Contains(out, "no pairing requests waiting") {
		t.Fatalf("ls after: %q", out)
	}
	if c, _, errOut := parley(t, ctx, "pairing", "approve", "--config", path); c != 2 || !strings.Contains(errOut, "takes 1 argument") {
		t.Fatalf("approve without a code: exit %d %q", c, errOut)
	}
}
