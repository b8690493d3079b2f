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

// `parley pairing revoke CHANNEL USER` takes an approval back (the store
// no longer lets them in), says what follows, and refuses, with what to do,
// a channel the config doesn't have or a person who wasn't approved;
// people lists them by name, and block and unblock say what they did.
func TestPairingRevoke(t *testing.T) {
	ctx := context.Background()
	path, _ := writeConfig(t, "adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: pairing\n    token: \"123:abc\"\n")
	cfg, _, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	db, _, err := daemon.OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	store := gateway.NewStore(db, nil)
	code, err := store.RequestPairing(ctx, adapters.Inbound{Adapter: "tg-main", Surface: "telegram",
		ChatID: "77", UserID: "77", DisplayName: "Ann", MessageID: "1", Text: "hi", Time: time.Now()})
	if err == nil {
		_, err = store.ApprovePairing(ctx, code)
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if c, out, errOut := parley(t, ctx, "pairing", "people", "--config", path); c != 0 || !strings.Contains(out, "Ann") || !strings.Contains(out, "approved") {
		t.Fatalf("people: exit %d %q %q", c, out, errOut)
	}
	if c, out, errOut := parley(t, ctx, "pairing", "revoke", "tg-main", "77", "--config", path); c != 0 ||
		!strings.Contains(out, "revoked 77 on tg-main: their next message is refused") {
		t.Fatalf("revoke: exit %d %q %q", c, out, errOut)
	}
	db, _, err = daemon.OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := gateway.NewStore(db, nil).Allowed(ctx, "tg-main", "77")
	db.Close()
	if err != nil || allowed {
		t.Fatalf("still allowed after the revoke: %v %v", allowed, err)
	}
	if c, _, errOut := parley(t, ctx, "pairing", "revoke", "tg-main", "77", "--config", path); c != 1 || !strings.Contains(errOut, "was not approved on tg-main") ||
		!strings.Contains(errOut, "parley pairing people") {
		t.Fatalf("revoke twice: exit %d %q", c, errOut)
	}
	if c, _, errOut := parley(t, ctx, "pairing", "revoke", "discord", "77", "--config", path); c != 1 || !strings.Contains(errOut, `no channel "discord" in the config (its channels: tg-main)`) {
		t.Fatalf("revoke on an unknown channel: exit %d %q", c, errOut)
	}
	if c, _, errOut := parley(t, ctx, "pairing", "revoke", "tg-main", "--config", path); c != 2 || !strings.Contains(errOut, "takes 2 argument") {
		t.Fatalf("revoke without a user: exit %d %q", c, errOut)
	}
	if c, out, errOut := parley(t, ctx, "pairing", "block", "tg-main", "77", "--config", path); c != 0 || !strings.Contains(out, "blocked 77 on tg-main") {
		t.Fatalf("block: exit %d %q %q", c, out, errOut)
	}
	if c, out, _ := parley(t, ctx, "pairing", "people", "--config", path); c != 0 || !strings.Contains(out, "blocked") || !strings.Contains(out, "Ann") {
		t.Fatalf("people after the block: %q", out)
	}
	if c, out, errOut := parley(t, ctx, "pairing", "unblock", "tg-main", "77", "--config", path); c != 0 || !strings.Contains(out, "unblocked 77 on tg-main") {
		t.Fatalf("unblock: exit %d %q %q", c, out, errOut)
	}
}
