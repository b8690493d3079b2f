package main

import (
	"context"
	"flag"
	"io"
	"os/user"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/cli"
)

// cmdChat talks to the local agent in process, through the same path as
// every channel: the session cli:chat, kept across runs.
func cmdChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	path := configFlag(fs)
	if _, err := parseFlags(fs, args, 0); err != nil {
		return err
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
	d, err := startDaemon(ctx, cfg, log, map[adapters.ID]adapters.Adapter{"cli": term})
	if err != nil {
		return err
	}
	defer d.close()
	return d.run(ctx)
}
