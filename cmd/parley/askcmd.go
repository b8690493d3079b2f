package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/cli"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/sessions"
)

// askResult is what `parley ask --json` prints.
type askResult struct {
	Session string `json:"session"`
	Reply   string `json:"reply"`
	Error   string `json:"error,omitempty"`
}

// cmdAsk answers one question in a fresh session and exits: through a
// running daemon's API when one runs, else in process.
func cmdAsk(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("ask")
	asJSON := fs.Bool("json", false, "print {session, reply, error} as JSON")
	server := fs.String("server", "", "ask a running parley at this address (default: the one this config's daemon records, if it runs)")
	token := fs.String("token", "", "an API token of that daemon (default: $PARLEY_API_TOKEN, then the config's first)")
	if err := fs.parse(args, -1); err != nil {
		return err
	}
	question := strings.TrimSpace(strings.Join(fs.Args(), " "))
	if question == "" || question == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, adapters.MaxTextBytes+1))
		if err != nil {
			return fmt.Errorf("read the question from standard input: %w", err)
		}
		question = strings.TrimSpace(string(b))
	}
	if question == "" {
		return fmt.Errorf("%w: nothing to ask; give the question as arguments or on standard input", errUsage)
	}
	cfg, _, err := loadConfig(*fs.config)
	if err != nil {
		return err
	}
	var res askResult
	if c, ok := runningDaemon(cfg, *server, *token); ok {
		if c.Token == "" {
			return errors.New("a parley runs on this config; asking it needs an API token: set http.tokens, or pass --token or PARLEY_API_TOKEN")
		}
		// A session of its own, cli:run:<time>, as in process: the daemon
		// archives it once its run ends.
		var sess struct{ ID string }
		var err error
		if sess.ID, err = c.OpenCLISession(ctx, sessions.CLIRunPrefix+time.Now().UTC().Format("20060102T150405.000Z"), cliUser(), "parley ask"); err != nil {
			return fmt.Errorf("open a session on %s: %w", c.Base, err)
		}
		var run struct {
			RunID string `json:"run_id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/messages", map[string]any{"content": question}, &run); err != nil {
			return err
		}
		var reply bytes.Buffer
		out := io.Writer(&reply)
		if !*asJSON {
			out = io.MultiWriter(&reply, stdout)
		}
		failure, err := c.FollowWith(ctx, sess.ID, run.RunID, out, c.DenyQuestions(sess.ID, stderr))
		if err != nil {
			return err
		}
		res = askResult{Session: sess.ID, Reply: reply.String(), Error: failure}
		if !*asJSON {
			fmt.Fprintln(stdout)
		}
	} else {
		quiet := cfg.Log
		quiet.Level = "warn"
		once := cli.NewOnce("cli", question, cliUser())
		d, err := daemon.New(ctx, cfg, newLogger(stderr, quiet), daemon.WithChannels(map[adapters.ID]adapters.Adapter{"cli": once}))
		if err != nil {
			return err
		}
		defer d.Close()
		if err := d.Run(ctx); err != nil {
			return err
		}
		res = askResult{Session: cli.Surface + ":" + once.ChatID(), Reply: once.Reply()}
		if res.Reply == "" && ctx.Err() == nil {
			res.Error = "no reply came"
		}
		if !*asJSON {
			fmt.Fprintln(stdout, res.Reply)
		}
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
	}
	if res.Error != "" {
		return fmt.Errorf("the turn failed: %s", res.Error)
	}
	return nil
}
