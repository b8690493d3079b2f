package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/runfile"
)

// cmdStatus asks a running daemon for its live state.
func cmdStatus(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("status")
	server := fs.String("server", "", "the daemon's address (default: the one its run file records)")
	token := fs.String("token", "", "an API token of the daemon (default: $PARLEY_API_TOKEN, then the config's first)")
	asJSON := fs.Bool("json", false, "print the state as JSON")
	cfg, err := fs.load(args, 0, "http")
	if err != nil {
		return err
	}
	c, ok := runningDaemon(cfg, *server, *token)
	if !ok {
		return fmt.Errorf("no parley is running on this config (no run file at %s); start it with parley run, or pass --server", runfile.Path(cfg))
	}
	if c.Token == "" {
		return errors.New("parley status needs an API token: set http.tokens in the config, or pass --token or PARLEY_API_TOKEN")
	}
	var st daemon.Status
	if err := c.Do(ctx, "GET", "/v1/status", nil, &st); err != nil {
		return fmt.Errorf("ask the daemon at %s: %w", c.Base, err)
	}
	if *asJSON {
		return printJSON(stdout, st)
	}
	fmt.Fprintf(stdout, "parley %s · up %s · %s · replica %s · listening on %s\n", st.Version,
		time.Since(st.Started).Round(time.Second), st.Engine, st.Replica, st.Listen)
	fmt.Fprintf(stdout, "lanes: %d busy, %d messages queued · outbox: %d pending, %d failed\n", st.Lanes, st.Queued, st.Outbox.Pending, st.Outbox.Failed)
	if !st.Outbox.OldestPending.IsZero() {
		fmt.Fprintf(stdout, "oldest pending reply queued %s ago\n", time.Since(st.Outbox.OldestPending).Round(time.Second))
	}
	w := newTable(stdout, "\nCHANNEL\tHEALTHY\tDETAIL")
	for _, ch := range st.Channels {
		fmt.Fprintf(w, "%s\t%v\t%s\n", ch.ID, ch.Healthy, ch.Detail)
	}
	if len(st.Runs) > 0 {
		fmt.Fprintln(w, "\nSESSION\tSTATE\tSINCE")
		for _, r := range st.Runs {
			since := "-"
			if !r.Status.StartedAt.IsZero() {
				since = time.Since(r.Status.StartedAt).Round(time.Second).String()
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", r.SessionID, r.Status.State, since)
		}
	}
	if len(st.CronJobs) > 0 {
		fmt.Fprintln(w, "\nCRON JOB\tSCHEDULE\tNEXT")
		for _, j := range st.CronJobs {
			next := "disabled"
			if j.Enabled && !j.Next.IsZero() {
				next = j.Next.Local().Format(time.DateTime)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", j.ID, j.Schedule, next)
		}
	}
	return w.Flush()
}
