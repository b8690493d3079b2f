package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/textcut"
	"github.com/parleyd/parley/webhooks"
)

func cmdHooks(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("hooks " + args[0]) // dispatch has checked args[0] against the command table
	limit := fs.Int("limit", 20, "how many deliveries, newest first (1-1000)")
	want := 0
	if args[0] == "deliveries" {
		want = 1
	}
	uses := []string{"database"}
	if args[0] == "ls" {
		// What the listing shows; not the secrets, which the operator's
		// shell need not have.
		uses = []string{"http.listen", "agents[].id", "hooks[].id", "hooks[].auth", "hooks[].agent", "hooks[].mode", "hooks[].notify"}
	}
	cfg, err := fs.load(args[1:], want, uses...)
	if err != nil {
		return err
	}
	if args[0] == "ls" {
		return printTable(stdout, "no hooks configured; add them under hooks in the config", "ID\tURL\tAUTH\tAGENT\tMODE\tNOTIFY", cfg.Hooks, func(h config.Hook) string {
			return fmt.Sprintf("%s\t%s/hooks/%s\t%s\t%s\t%s\t%v", h.ID, httpserve.LocalURL(cfg.HTTP.Listen), h.ID, h.Auth, h.Agent, h.Mode, h.Notify)
		})
	}
	if *limit < 1 || *limit > 1000 {
		return fmt.Errorf("%w: --limit %d is out of range; use 1 to 1000", errUsage, *limit)
	}
	db, err := openExisting(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	ds, err := webhooks.Deliveries(ctx, db, fs.Arg(0), *limit)
	if err != nil {
		return err
	}
	return printTable(stdout, "no deliveries for hook "+fs.Arg(0), "RECEIVED\tSTATUS\tHTTP\tDURATION\tSESSION\tREPLY", ds, func(d webhooks.Delivery) string {
		reply := d.Reply
		if d.Err != "" {
			reply = "error: " + d.Err
		}
		reply = textcut.Runes(reply, 60, "…")
		code := "-" // no answer recorded: a sync request still waiting, or a sender that left first
		if d.HTTPStatus != 0 {
			code = strconv.Itoa(d.HTTPStatus)
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", d.ReceivedAt.Local().Format(time.DateTime), d.Status, code, d.Duration, d.SessionKey, reply)
	})
}
