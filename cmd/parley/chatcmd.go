package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/cli"
	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/dbutil"
)

// cmdChat talks to the local agent through the same path as every
// channel, in the session cli:chat, kept across runs: in process, or
// through the daemon that runs on this config (its run file says where),
// or through the server --server names. Ctrl-C stops the reply being
// written; Ctrl-C with nothing running, /quit or the end of input leave.
func cmdChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("chat")
	server := fs.String("server", "", "talk to a running parley at this address (host:port or URL) through its HTTP API")
	token := fs.String("token", os.Getenv("PARLEY_API_TOKEN"), "an API token of that server (default: $PARLEY_API_TOKEN)")
	if err := fs.parse(args, 0); err != nil {
		return err
	}
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	if *server != "" {
		return client.ChatWith(ctx, &client.Client{Base: serverURL(*server), Token: *token}, client.ChatOptions{Interrupts: interrupts}, stdin, stdout)
	}
	cfg, _, err := loadConfig(*fs.config)
	if err != nil {
		return err
	}
	if c, ok := runningDaemon(cfg, "", *token); ok && c.Token != "" {
		return remoteCLIChat(ctx, c, interrupts, stdin, stdout, stderr)
	}
	quiet := cfg.Log
	if quiet.Level == "info" || quiet.Level == "debug" {
		quiet.Level = "warn" // the terminal is the conversation
	}
	log := newLogger(stderr, quiet)
	term := cli.New("cli", stdin, stdout, cliUser())
	d, err := daemon.New(ctx, cfg, log, daemon.WithChannels(map[adapters.ID]adapters.Adapter{"cli": term}))
	if errors.Is(err, dbutil.ErrLocked) {
		// A daemon holds the database: talk to it.
		c := lockingDaemon(cfg, *token)
		if c.Token == "" {
			return fmt.Errorf("%w\nto talk to that daemon instead, give it an API token (http.tokens in its config) and run parley chat --token", err)
		}
		return remoteCLIChat(ctx, c, interrupts, stdin, stdout, stderr)
	}
	if err != nil {
		return err
	}
	defer d.Close()
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-interrupts:
				if !term.Interrupt() {
					quit()
					return
				}
			}
		}
	}()
	return d.Run(ctx)
}

// cliUser is who the terminal's sessions belong to: the login name.
func cliUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "local"
}

// remoteCLIChat talks to a running daemon in the person's session cli:chat,
// opened there when there is none yet, as in process.
func remoteCLIChat(ctx context.Context, c *client.Client, interrupts <-chan os.Signal, stdin io.Reader, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "a parley runs on this config; talking to it at %s\n", c.Base)
	session, err := c.CLISession(ctx, cliUser())
	if err != nil {
		return fmt.Errorf("find the cli:chat session on %s: %w", c.Base, err)
	}
	return client.ChatWith(ctx, c, client.ChatOptions{Session: session, Interrupts: interrupts}, stdin, stdout)
}
