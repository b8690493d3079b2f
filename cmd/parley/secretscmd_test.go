package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyd/parley/vault"
)

func withInput(t *testing.T, ctx context.Context, in string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWithInput(ctx, args, strings.NewReader(in), &out, &errOut)
	return code, out.String(), errOut.String()
}

// set reads the value from standard input (never argv), ls shows names
// and dates only, rm deletes, rotate moves everything to a new key and
// says what to set, keygen makes keys.
func TestSecretsCommands(t *testing.T) {
	ctx := context.Background()
	path, _ := writeConfig(t, "")
	if c, out, errOut := parley(t, ctx, "migrate", "--config", path); c != 0 {
		t.Fatalf("migrate: %d %s %s", c, out, errOut)
	}
	c, out, _ := parley(t, ctx, "secrets", "keygen")
	oldKey, err := vault.ParseKey(out)
	if c != 0 || err != nil {
		t.Fatalf("keygen: %d %q %v", c, out, err)
	}
	// Without a key nothing can be sealed, and the error says what to set.
	t.Setenv(vault.EnvKey, "")
	if c, _, errOut := withInput(t, ctx, "v\n", "secrets", "set", "gh", "--config", path); c == 0 || !strings.Contains(errOut, "PARLEY_SECRET_KEY") {
		t.Fatalf("set without a key: %d %q", c, errOut)
	}
	t.Setenv(vault.EnvKey, oldKey.Encode())
	if c, out, errOut := withInput(t, ctx, "ghp_value_one\n", "secrets", "set", "gh", "--config", path); c != 0 || !strings.Contains(out, "stored secret gh") ||
		!strings.Contains(out, "${secret:gh}") || strings.Contains(out+errOut, "ghp_value_one") {
		t.Fatalf("set: %d %q %q", c, out, errOut)
	}
	if c, out, errOut := withInput(t, ctx, "ghp_value_two", "secrets", "set", "gh", "--config", path); c != 0 || !strings.Contains(out, "replaced secret gh") {
		t.Fatalf("set again: %d %q %q", c, out, errOut)
	}
	if c, _, errOut := withInput(t, ctx, "", "secrets", "set", "gh", "ghp_on_argv", "--config", path); c == 0 ||
		!strings.Contains(errOut, "never the command line") || strings.Contains(errOut, "ghp_on_argv") {
		t.Fatalf("set with a value on argv: %d %q", c, errOut)
	}
	if c, _, errOut := withInput(t, ctx, "", "secrets", "set", "empty", "--config", path); c == 0 || !strings.Contains(errOut, "empty") {
		t.Fatalf("set an empty value: %d %q", c, errOut)
	}
	c, out, _ = parley(t, ctx, "secrets", "ls", "--config", path)
	if c != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "gh ") || strings.Contains(out, "ghp_value") {
		t.Fatalf("ls: %d %q", c, out)
	}
	c, out, _ = parley(t, ctx, "secrets", "ls", "--json", "--config", path)
	if c != 0 || !strings.Contains(out, `"name":"gh"`) || strings.Contains(out, "ghp_value") {
		t.Fatalf("ls --json: %d %q", c, out)
	}
	if c, out, _ := parley(t, ctx, "secrets", "ls", "--connections", "--config", path); c != 0 || !strings.Contains(out, "no connections") {
		t.Fatalf("ls --connections: %d %q", c, out)
	}

	// Rotation: the new key from the environment, then from a file.
	_, newOut, _ := parley(t, ctx, "secrets", "keygen")
	t.Setenv(vault.EnvNewKey, strings.TrimSpace(newOut))
	c, out, errOut := parley(t, ctx, "secrets", "rotate", "--config", path)
	if c != 0 || !strings.Contains(out, "sealed 1 secret(s), 0 connection(s)") || !strings.Contains(out, "set PARLEY_SECRET_KEY to the value of $PARLEY_SECRET_NEW_KEY") {
		t.Fatalf("rotate: %d %q %q", c, out, errOut)
	}
	// Run twice, it finds everything moved already.
	if c, out, errOut := parley(t, ctx, "secrets", "rotate", "--config", path); c != 0 || !strings.Contains(out, "sealed 0 secret(s)") || !strings.Contains(out, "1 were under it already") {
		t.Fatalf("rotate again: %d %q %q", c, out, errOut)
	}
	t.Setenv(vault.EnvKey, strings.TrimSpace(newOut))
	t.Setenv(vault.EnvNewKey, "")
	keyFile := filepath.Join(t.TempDir(), "next.key")
	if c, out, _ := parley(t, ctx, "secrets", "keygen", "--out", keyFile); c != 0 || !strings.Contains(out, "mode 0600") {
		t.Fatalf("keygen --out: %d %q", c, out)
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	if c, _, _ := parley(t, ctx, "secrets", "keygen", "--out", keyFile); c == 0 {
		t.Fatal("keygen overwrote a file")
	}
	if c, out, errOut := parley(t, ctx, "secrets", "rotate", "--new-key-file", keyFile, "--config", path); c != 0 || !strings.Contains(out, "point secrets.key_file at "+keyFile) {
		t.Fatalf("rotate --new-key-file: %d %q %q", c, out, errOut)
	}
	if c, _, errOut := parley(t, ctx, "secrets", "rotate", "--config", path); c == 0 || !strings.Contains(errOut, vault.EnvNewKey) {
		t.Fatalf("rotate with no new key: %d %q", c, errOut)
	}
	// The key file named in the config is the key now.
	t.Setenv(vault.EnvKey, "")
	path2, _ := writeConfig(t, "secrets:\n  key_file: "+keyFile+"\n")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(strings.SplitN(string(data), "\n", 3)[1], "  url: ")
	if err := os.WriteFile(path2, []byte("database:\n  url: "+db+"\nsecrets:\n  key_file: "+keyFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, out, errOut := withInput(t, ctx, "x", "secrets", "set", "other", "--config", path2); c != 0 || !strings.Contains(out, "stored secret other") {
		t.Fatalf("set with the key file: %d %q %q", c, out, errOut)
	}
	if c, out, _ := parley(t, ctx, "secrets", "rm", "gh", "--config", path); c != 0 || !strings.Contains(out, "deleted secret gh") {
		t.Fatalf("rm: %d %q", c, out)
	}
	if c, _, errOut := parley(t, ctx, "secrets", "rm", "gh", "--config", path); c == 0 || !strings.Contains(errOut, "no secret gh") {
		t.Fatalf("rm again: %d %q", c, errOut)
	}
}

// A secret can be set on a fresh install, before parley run or migrate;
// a key other than the one the store was sealed with is refused by set
// and by run, naming both keys, and leaves the store under one key.
func TestSecretsRefuseAWrongKey(t *testing.T) {
	ctx := context.Background()
	path, _ := writeConfig(t, "")
	_, out, _ := parley(t, ctx, "secrets", "keygen")
	first, err := vault.ParseKey(out)
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ = parley(t, ctx, "secrets", "keygen")
	second, err := vault.ParseKey(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(vault.EnvKey, first.Encode())
	if c, out, errOut := withInput(t, ctx, "ghp_value_one\n", "secrets", "set", "gh", "--config", path); c != 0 || !strings.Contains(out, "stored secret gh") {
		t.Fatalf("set on a fresh install, before migrate: %d %q %q", c, out, errOut)
	}
	t.Setenv(vault.EnvKey, second.Encode())
	c, _, errOut := withInput(t, ctx, "other\n", "secrets", "set", "other", "--config", path)
	if c == 0 || !strings.Contains(errOut, "sealed with key "+first.ID()) || !strings.Contains(errOut, "is key "+second.ID()) {
		t.Fatalf("set under another key: %d %q", c, errOut)
	}
	c, _, errOut = parley(t, ctx, "run", "--config", path)
	if c == 0 || !strings.Contains(errOut, "sealed with key "+first.ID()) {
		t.Fatalf("run under another key: %d %q", c, errOut)
	}
	// Nothing was sealed under the second key: rotation from the first works.
	t.Setenv(vault.EnvKey, first.Encode())
	t.Setenv(vault.EnvNewKey, second.Encode())
	if c, out, errOut := parley(t, ctx, "secrets", "rotate", "--config", path); c != 0 || !strings.Contains(out, "sealed 1 secret(s)") {
		t.Fatalf("rotate: %d %q %q", c, out, errOut)
	}
}
