package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/parleyd/parley/acpserve"
	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/turns"
)

// cmdACP serves a parley agent to an editor over the Agent Client
// Protocol on stdio: in process on the configured database, or in front of
// the daemon that runs on this config (its run file says where) or that
// --server names, through its HTTP API. Either way the ACP side speaks
// to parley's API, so both paths are the same code.
func cmdACP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("acp")
	server := fs.String("server", "", "talk to a running parley at this address (default: the one this config's daemon records, if it runs)")
	token := fs.String("token", "", "an API token of that daemon (default: $PARLEY_API_TOKEN, then the config's first)")
	agentID := fs.String("agent", "", "the agent of the sessions the editor starts (default: the config's first)")
	harnessID := fs.String("harness", "", "the harness (harnesses[] in the config) the sessions the editor starts run on (default: their agent's)")
	cfg, err := fs.load(args, 0)
	if err != nil {
		return err
	}
	if f, ok := stdout.(*os.File); ok && f == os.Stdout {
		// Standard output carries only ACP messages: anything else
		// written there (by a library, say) goes to standard error.
		os.Stdout = os.Stderr
		defer func() { os.Stdout = f }()
	}
	log := newLogger(stderr, cfg.Log)
	opts := acpserve.Options{Agent: *agentID, Harness: *harnessID, Version: version(), Log: log.With("component", "acp")}
	if c, ok := runningDaemon(cfg, *server, *token); ok {
		return forwardACP(ctx, c, opts, stdin, stdout, stderr)
	}
	// In process: the daemon's API, reached in memory with a token only
	// this process knows. (A daemon elsewhere checks --agent itself, at
	// session/new, against its own config.)
	if *agentID != "" {
		if _, ok := cfg.Agent(*agentID); !ok {
			return fmt.Errorf("--agent %q is not an agent of this config; the agents are %s", *agentID, strings.Join(cfg.AgentIDs(), ", "))
		}
	}
	if *harnessID != "" {
		if _, ok := cfg.Harness(*harnessID); !ok {
			var ids []string
			for _, h := range cfg.Harnesses {
				ids = append(ids, h.ID)
			}
			if len(ids) == 0 {
				return fmt.Errorf("--harness %q: this config has no harnesses; add one under harnesses, or leave --harness out", *harnessID)
			}
			return fmt.Errorf("--harness %q is not a harness of this config; its harnesses are %s", *harnessID, strings.Join(ids, ", "))
		}
	}
	own, err := randomToken()
	if err != nil {
		return err
	}
	cfg.HTTP.Tokens = append(cfg.HTTP.Tokens, config.Secret(own))
	d, err := daemon.New(ctx, cfg, log, daemon.WithChannels(map[adapters.ID]adapters.Adapter{adapters.ID(turns.APIAdapterID): turns.APIChannel{}}),
		daemon.WithConfigPath(fs.used), daemon.WithVersion(version()))
	if errors.Is(err, dbutil.ErrLocked) {
		// A daemon holds the database: talk to it.
		return forwardACP(ctx, lockingDaemon(cfg, *token), opts, stdin, stdout, stderr)
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Start(ctx); err != nil {
		return err
	}
	hc, stopAPI := acpserve.InMemory(d.APIHandler())
	opts.Client = &client.Client{Base: "http://parley", Token: own, HTTP: hc}
	log.InfoContext(ctx, "serving ACP on standard input and output", "version", version())
	serveErr := acpserve.Serve(ctx, opts, stdin, stdout)
	stopAPI()
	return errors.Join(serveErr, d.Stop(context.WithoutCancel(ctx)))
}

// forwardACP serves ACP in front of the running daemon c, through its API.
func forwardACP(ctx context.Context, c *client.Client, opts acpserve.Options, stdin io.Reader, stdout, stderr io.Writer) error {
	if c.Token == "" {
		return errors.New("a parley runs on this config; talking to it needs an API token: set http.tokens, or pass --token or PARLEY_API_TOKEN")
	}
	fmt.Fprintf(stderr, "a parley runs on this config; passing ACP sessions to its API at %s\n", c.Base)
	opts.Client = c
	return acpserve.Serve(ctx, opts, stdin, stdout)
}

// randomToken is a fresh API token for this process alone.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make an API token for the in-process API: %w", err)
	}
	return hex.EncodeToString(b), nil
}
