package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"text/tabwriter"
	"time"

	"github.com/parleyd/parley/textcut"
	"github.com/parleyd/parley/webhooks"
)

func cmdHooks(ctx context.Context, args []string, stdout io.Writer) error {
	const use = "parley hooks ls | parley hooks deliveries ID [--limit N] [--config FILE]"
	if len(args) == 0 || (args[0] != "ls" && args[0] != "deliveries") {
		return fmt.Errorf("%w: %s", errUsage, use)
	}
	fs := flag.NewFlagSet("hooks "+args[0], flag.ContinueOnError)
	path := configFlag(fs)
	limit := fs.Int("limit", 20, "how many deliveries, newest first (1-1000)")
	want := 0
	if args[0] == "deliveries" {
		want = 1
	}
	rest, err := parseFlags(fs, args[1:], want)
	if err != nil {
		return err
	}
	uses := []string{"database"}
	if args[0] == "ls" {
		// What the listing shows; not the secrets, which the operator's
		// shell need not have.
		uses = []string{"http.listen", "agents[].id", "hooks[].id", "hooks[].auth", "hooks[].agent", "hooks[].mode", "hooks[].notify"}
	}
	cfg, _, err := loadConfigFor(*path, uses...)
	if err != nil {
		return err
	}
	if args[0] == "ls" {
		if len(cfg.Hooks) == 0 {
			fmt.Fprintln(stdout, "no hooks configured; add them under hooks in the config")
			return nil
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tURL\tAUTH\tAGENT\tMODE\tNOTIFY")
		for _, h := range cfg.Hooks {
			fmt.Fprintf(w, "%s\t%s/hooks/%s\t%s\t%s\t%s\t%v\n", h.ID, baseURL(cfg.HTTP.Listen), h.ID, h.Auth, h.Agent, h.Mode, h.Notify)
		}
		return w.Flush()
	}
	if *limit < 1 || *limit > 1000 {
		return fmt.Errorf("%w: --limit %d is out of range; use 1 to 1000", errUsage, *limit)
	}
	db, err := openExisting(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	ds, err := webhooks.Deliveries(ctx, db, rest[0], *limit)
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		fmt.Fprintf(stdout, "no deliveries for hook %s\n", rest[0])
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RECEIVED\tSTATUS\tHTTP\tDURATION\tSESSION\tREPLY")
	for _, d := range ds {
		reply := d.Reply
		if d.Err != "" {
			reply = "error: " + d.Err
		}
		reply = textcut.Runes(reply, 60, "…")
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", d.ReceivedAt.Local().Format(time.DateTime), d.Status, d.HTTPStatus, d.Duration, d.SessionKey, reply)
	}
	return w.Flush()
}

// baseURL is where this machine reaches a daemon listening on listen: its
// host, or localhost when it listens on every interface.
func baseURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
