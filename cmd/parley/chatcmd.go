package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/daemon"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/cli"
	"github.com/parleyd/parley/dbutil"
)

// cmdChat talks to the local agent in process, through the same path as
// every channel: the session cli:chat, kept across runs.
func cmdChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	path := configFlag(fs)
	server := fs.String("server", "", "talk to a running parley at this address (host:port or URL) through its HTTP API")
	token := fs.String("token", os.Getenv("PARLEY_API_TOKEN"), "an API token of that server (default: $PARLEY_API_TOKEN)")
	if _, err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *server != "" {
		return client.Chat(ctx, *server, *token, stdin, stdout)
	}
	cfg, _, err := loadConfig(*path)
	if err != nil {
		return err
	}
	quiet := cfg.Log
	if quiet.Level == "info" || quiet.Level == "debug" {
		quiet.Level = "warn" // the terminal is the conversation
	}
	log := newLogger(stderr, quiet)
	name := "local"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	term := cli.New("cli", stdin, stdout, name)
	d, err := daemon.New(ctx, cfg, log, daemon.WithChannels(map[adapters.ID]adapters.Adapter{"cli": term}))
	if errors.Is(err, dbutil.ErrLocked) {
		// A daemon holds the database: talk to it instead, through its API.
		tok := *token
		if tok == "" && len(cfg.HTTP.Tokens) > 0 {
			tok = cfg.HTTP.Tokens[0].Reveal()
		}
		if tok == "" {
			return fmt.Errorf("%w\nto talk to that daemon instead, give it an API token (http.tokens in its config) and run parley chat --token", err)
		}
		fmt.Fprintf(stderr, "a running parley holds the database; talking to it at %s\n", cfg.HTTP.Listen)
		return client.Chat(ctx, cfg.HTTP.Listen, tok, stdin, stdout)
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Run(ctx)
}
