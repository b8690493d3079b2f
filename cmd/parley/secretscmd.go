package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/parleyd/parley/vault"
)

// secretsCommand manages the secrets store: named secrets for
// ${secret:NAME} in the config, and the key they are sealed with.
var secretsCommand = &command{name: "secrets", summary: "the encrypted secrets store: ${secret:NAME} values and people's tokens",
	about: "Secrets are sealed with AES-256-GCM under a key kept outside the database: $" + vault.EnvKey + " (base64, from parley secrets keygen) " +
		"or the file secrets.key_file names. The config refers to one as ${secret:NAME}; parley resolves it when it starts.",
	subs: []*command{
		{name: "set", args: "NAME [--config FILE]", summary: "store a secret, reading its value from standard input",
			about: "Reads the value from standard input (hidden when it is a terminal; one trailing newline is dropped) and seals it under NAME, " +
				"replacing any earlier value. The value is never taken from the command line, where shell history and ps would keep it. " +
				"A running parley reads it at its next start or reload.",
			examples: []string{"parley secrets set github_token", "printf %s \"$TOKEN\" | parley secrets set github_token",
				"parley secrets set openai_key < key.txt"}},
		{name: "ls", args: "[--connections] [--json] [--config FILE]", summary: "list the secrets' names and dates (never their values)",
			about:    "Lists each secret's name and when it was created and last changed; with --connections, people's connections (user, provider, dates) instead. No key is needed.",
			examples: []string{"parley secrets ls", "parley secrets ls --connections --json"}},
		{name: "rm", args: "NAME [--config FILE]", summary: "delete a secret",
			examples: []string{"parley secrets rm github_token"}},
		{name: "rotate", args: "[--new-key-file FILE] [--config FILE]", summary: "seal every secret and connection again under a new key",
			about: "Opens every secret, user connection and sealed device key with the current key ($" + vault.EnvKey + " or secrets.key_file) and seals it " +
				"under the new one ($" + vault.EnvNewKey + ", or the file --new-key-file names), in one transaction: all move or none do. " +
				"Then set the new key in place of the old and restart parley.",
			examples: []string{"parley secrets keygen --out /etc/parley/secret.key.new && parley secrets rotate --new-key-file /etc/parley/secret.key.new",
				"PARLEY_SECRET_NEW_KEY=$(parley secrets keygen) parley secrets rotate"}},
		{name: "keygen", args: "[--out FILE]", summary: "print a new random key, in base64",
			about:    "Prints a new 32-byte key in base64, for $" + vault.EnvKey + " or secrets.key_file; with --out it writes it to a new file readable by its owner only.",
			examples: []string{"parley secrets keygen", "parley secrets keygen --out /etc/parley/secret.key"}},
	}, run: func(ctx context.Context, s streams, args []string) error { return cmdSecrets(ctx, args, s) }}

func cmdSecrets(ctx context.Context, args []string, s streams) error {
	sub := args[0] // dispatch has checked it against the command table
	fs := flag.NewFlagSet("secrets "+sub, flag.ContinueOnError)
	var path *string
	if sub != "keygen" {
		path = configFlag(fs)
	}
	want := 0
	var conns, asJSON *bool
	var newKeyFile, out *string
	switch sub {
	case "set":
		want = -1 // a second argument is refused below, with why
	case "rm":
		want = 1
	case "ls":
		conns = fs.Bool("connections", false, "list people's connections (user, provider, dates) instead")
		asJSON = fs.Bool("json", false, "print JSON")
	case "rotate":
		newKeyFile = fs.String("new-key-file", "", "read the new key from this file (default: $"+vault.EnvNewKey+")")
	case "keygen":
		out = fs.String("out", "", "write the key to this new file (mode 0600) instead of printing it")
	}
	rest, err := parseFlags(fs, args[1:], want)
	if err != nil {
		return err
	}
	switch {
	case sub == "set" && len(rest) == 0:
		return fmt.Errorf("%w: parley secrets set NAME, with the value on standard input", errUsage)
	case sub == "set" && len(rest) > 1:
		return fmt.Errorf("%w: parley secrets set takes the value from standard input, never the command line (shell history and ps would keep it): "+
			"printf %%s \"$VALUE\" | parley secrets set %s", errUsage, rest[0])
	}
	if sub == "keygen" {
		return keygen(*out, s.out)
	}
	cfg, _, err := loadConfigFor(*path, "database", "secrets")
	if err != nil {
		return err
	}
	v, db, err := openVault(ctx, cfg, sub == "set")
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
	case "set":
		value, err := readSecret(s, rest[0])
		if err != nil {
			return err
		}
		created, err := v.Set(ctx, rest[0], value)
		if err != nil {
			return err
		}
		verb := "replaced"
		if created {
			verb = "stored"
		}
		fmt.Fprintf(s.out, "%s secret %s (sealed under key %s); refer to it as ${secret:%s}; a running parley reads it at its next start or reload\n",
			verb, rest[0], v.Key().ID(), rest[0])
	case "rm":
		found, err := v.Delete(ctx, rest[0])
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("no secret %s; parley secrets ls lists them", rest[0])
		}
		fmt.Fprintf(s.out, "deleted secret %s\n", rest[0])
	case "ls":
		return listSecrets(ctx, v, *conns, *asJSON, s.out)
	case "rotate":
		return rotate(ctx, v, *newKeyFile, cfg.Secrets.KeyFile, s.out)
	}
	return nil
}

// readSecret reads a secret's value: hidden from a terminal, else all of
// standard input less one trailing newline.
func readSecret(s streams, name string) (string, error) {
	var value string
	if f, ok := s.in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(s.err, "value of %s (hidden): ", name)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(s.err)
		if err != nil {
			return "", fmt.Errorf("read the value: %w", err)
		}
		value = string(b)
	} else {
		b, err := io.ReadAll(io.LimitReader(bufio.NewReader(s.in), 1<<20+1))
		if err != nil {
			return "", fmt.Errorf("read the value from standard input: %w", err)
		}
		if len(b) > 1<<20 {
			return "", errors.New("the value is over 1 MiB; a secret is a token or a key")
		}
		value = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	}
	if value == "" {
		return "", fmt.Errorf("the value is empty; pipe it in: printf %%s \"$VALUE\" | parley secrets set %s", name)
	}
	return value, nil
}

func listSecrets(ctx context.Context, v *vault.Store, conns, asJSON bool, out io.Writer) error {
	if conns {
		list, err := v.Connections(ctx, vault.User{})
		if err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(out).Encode(map[string]any{"connections": nonNil(list)})
		}
		return printTable(out, "no connections; people connect with /connect <provider> in a direct chat", "USER\tPROVIDER\tCONNECTED\tUPDATED", list, func(c vault.Connection) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s", c.User, c.Provider, c.CreatedAt.Local().Format("2006-01-02 15:04"), c.UpdatedAt.Local().Format("2006-01-02 15:04"))
		})
	}
	list, err := v.List(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(out).Encode(map[string]any{"secrets": nonNil(list)})
	}
	return printTable(out, "no secrets; add one with: parley secrets set NAME", "NAME\tCREATED\tUPDATED", list, func(e vault.Entry) string {
		return fmt.Sprintf("%s\t%s\t%s", e.Name, e.CreatedAt.Local().Format("2006-01-02 15:04"), e.UpdatedAt.Local().Format("2006-01-02 15:04"))
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// rotate seals everything again under the new key and says what to set.
func rotate(ctx context.Context, v *vault.Store, newKeyFile, keyFile string, out io.Writer) error {
	var newKey *vault.Key
	var err error
	from := "$" + vault.EnvNewKey
	switch {
	case newKeyFile != "":
		newKey, err = vault.ReadKeyFile(newKeyFile)
		from = newKeyFile
	case os.Getenv(vault.EnvNewKey) != "":
		newKey, err = vault.ParseKey(os.Getenv(vault.EnvNewKey))
		if err != nil {
			err = fmt.Errorf("%s: %w", vault.EnvNewKey, err)
		}
	default:
		return fmt.Errorf("%w: give the new key in $%s or --new-key-file (make one with parley secrets keygen)", errUsage, vault.EnvNewKey)
	}
	if err != nil {
		return err
	}
	if old := v.Key(); old != nil && old.ID() == newKey.ID() {
		return fmt.Errorf("the new key is the key in use (%s); make a new one with parley secrets keygen", old.ID())
	}
	res, err := v.Rotate(ctx, newKey)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sealed %d secret(s), %d connection(s) and %d other sealed value(s) again under key %s", res.Secrets, res.Connections, res.Blobs, newKey.ID())
	if res.Already > 0 {
		fmt.Fprintf(out, " (%d were under it already)", res.Already)
	}
	fmt.Fprintln(out)
	switch {
	case newKeyFile != "" && keyFile != "":
		fmt.Fprintf(out, "next: put the new key where parley reads it (move %s over %s, or point secrets.key_file at it), then restart parley; the old key opens nothing now\n", newKeyFile, keyFile)
	case newKeyFile != "":
		fmt.Fprintf(out, "next: point secrets.key_file at %s (or set %s to its contents), then restart parley; the old key opens nothing now\n", newKeyFile, vault.EnvKey)
	default:
		fmt.Fprintf(out, "next: set %s to the value of %s wherever parley runs (and in secrets.key_file's file, if you use one), unset %s, then restart parley; the old key opens nothing now\n",
			vault.EnvKey, from, vault.EnvNewKey)
	}
	return nil
}

// keygen prints a new key, or writes it to a new file only its owner
// reads.
func keygen(path string, out io.Writer) error {
	k, err := vault.GenerateKey()
	if err != nil {
		return err
	}
	if path == "" {
		_, err := fmt.Fprintln(out, k.Encode())
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write the key: %w (keygen never overwrites a file)", err)
	}
	if _, err := fmt.Fprintln(f, k.Encode()); err != nil {
		f.Close()
		return fmt.Errorf("write the key: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write the key: %w", err)
	}
	fmt.Fprintf(out, "wrote key %s to %s (mode 0600); keep a copy somewhere safe: without it the secrets are lost\n", k.ID(), path)
	return nil
}
