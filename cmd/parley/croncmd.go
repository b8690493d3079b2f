package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/textcut"
)

// cmdCron manages stored jobs and shows their receipts. It works beside a
// running daemon, which picks up changes (and runs asked for) within 15 s.
func cmdCron(ctx context.Context, args []string, stdout io.Writer) error {
	sub := args[0] // dispatch has checked it against the command table
	fs := newFlags("cron " + sub)
	var want int
	var id, schedule, prompt, agentID, tz, notify *string
	var timeout, catchUp *time.Duration
	var limit *int
	var full *bool
	switch sub {
	case "add":
		id = fs.String("id", "", "the job's id (default: generated)")
		schedule = fs.String("schedule", "", `5 or 6 cron fields or a descriptor, e.g. "0 9 * * 1-5" or "@every 2h"`)
		prompt = fs.String("prompt", "", "what the agent is asked each time")
		agentID = fs.String("agent", "", "the agent that runs it (default: the first)")
		tz = fs.String("timezone", "", "an IANA zone for the schedule (default: local time)")
		notify = fs.String("notify", "", "comma-separated targets, adapter:chat")
		timeout = fs.Duration("timeout", 0, "stop a run after this long (default 5m)")
		catchUp = fs.Duration("catch-up", 0, "run a fire missed while parley was down if it is no older than this")
	case "ls":
	case "rm", "run", "enable", "disable":
		want = 1
	case "runs":
		want = 1
		limit = fs.Int("limit", 20, "how many receipts, newest first (1-1000)")
		full = fs.Bool("full", false, "print each receipt whole: every time, the whole result or error, and each target's delivery")
	}
	var uses []string
	if sub == "add" {
		uses = []string{"agents[].id", "adapters"} // --agent and its default; --notify's channels
	}
	cfg, db, err := fs.open(ctx, args[1:], want, uses...)
	if err != nil {
		return err
	}
	defer db.Close()
	store := cron.NewStore(db, nil)
	jobID := fs.Arg(0) // of all but add
	switch sub {
	case "add":
		agent := *agentID
		if agent == "" {
			agent = cfg.Agents[0].ID
		}
		if _, ok := cfg.Agent(agent); !ok {
			return fmt.Errorf("%w: --agent %q is not an agent in the config", errUsage, agent)
		}
		var targets []string
		for _, t := range strings.Split(*notify, ",") {
			if t = strings.TrimSpace(t); t != "" {
				targets = append(targets, t)
			}
		}
		parsed, err := cron.ParseTargets(targets)
		if err != nil {
			return fmt.Errorf("%w: --notify: %v", errUsage, err)
		}
		for _, t := range parsed {
			if err := cfg.CheckNotifyTarget(t.String()); err != nil {
				return fmt.Errorf("%w: --notify: %v", errUsage, err)
			}
		}
		j, err := store.Add(ctx, cron.Job{ID: *id, Schedule: *schedule, Timezone: *tz, AgentID: agent, Prompt: *prompt,
			Notify: parsed, Timeout: *timeout, CatchUp: *catchUp, Source: cron.SourceCLI})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "added job %s (%s); a running parley picks it up within 15 s\n", j.ID, j.Schedule)
	case "ls":
		jobs, err := store.List(ctx)
		if err != nil {
			return err
		}
		return printTable(stdout, "no cron jobs; add them under cron.jobs in the config or with parley cron add",
			"ID\tSCHEDULE\tAGENT\tENABLED\tSOURCE\tNEXT\tNOTIFY", jobs, func(j cron.Job) string {
				next := "-"
				if s, err := j.ParsedSchedule(); err == nil && j.Enabled() {
					next = s.Next(time.Now()).Local().Format(time.DateTime)
				}
				return fmt.Sprintf("%s\t%s\t%s\t%v\t%s\t%s\t%v", j.ID, j.Schedule, j.AgentID, j.Enabled(), j.Source, next, j.Notify)
			})
	case "rm":
		if err := store.Remove(ctx, jobID); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed job %s\n", jobID)
	case "enable", "disable":
		if err := store.SetEnabled(ctx, jobID, sub == "enable"); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%sd job %s; a running parley picks it up within 15 s\n", sub, jobID)
	case "run":
		r, err := store.RequestRun(ctx, jobID)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "run %s queued; a running parley starts it within 15 s (see parley cron runs %s)\n", r.ID, jobID)
	case "runs":
		if *limit < 1 || *limit > 1000 {
			return fmt.Errorf("%w: --limit %d is out of range; use 1 to 1000", errUsage, *limit)
		}
		runs, err := store.Runs(ctx, jobID, *limit)
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			fmt.Fprintf(stdout, "no runs of job %s yet\n", jobID)
			return nil
		}
		var targets []cron.Target
		if j, err := store.Job(ctx, jobID); err == nil {
			targets = j.Notify
		}
		outbox := gateway.NewStore(db, nil)
		if *full {
			return printReceipts(ctx, stdout, outbox, runs, targets)
		}
		w := newTable(stdout, "SCHEDULED\tSTATUS\tTOOK\tSESSION\tNOTIFY\tRESULT")
		for _, r := range runs {
			notify, err := notifyState(ctx, outbox, r, targets)
			if err != nil {
				return err
			}
			took := "-"
			if !r.EndedAt.IsZero() && !r.StartedAt.IsZero() {
				took = r.EndedAt.Sub(r.StartedAt).Round(time.Millisecond).String()
			}
			result := r.Result
			if r.Error != "" {
				result = r.Error
			}
			result = textcut.Runes(result, 60, "…")
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ScheduledAt.Local().Format(time.DateTime), r.Status, took, r.SessionID,
				textcut.Runes(strings.ReplaceAll(notify, "\n", " "), 80, "…"), strings.ReplaceAll(result, "\n", " "))
		}
		return w.Flush()
	}
	return nil
}

// notifyState says whether a run's result reached the job's notify
// targets, from the outbox rows its notes went out as: "delivered",
// "queued", "retrying (N tries): <error>", "failed after N tries:
// <error>", "not queued", or "-" when there was nothing to send. A run
// that is ok with a notify that keeps failing says so here.
func notifyState(ctx context.Context, outbox *gateway.Store, r cron.Run, targets []cron.Target) (string, error) {
	if len(targets) == 0 || !r.Status.Finished() || r.Status == cron.StatusSkipped ||
		(r.Status == cron.StatusOK && strings.TrimSpace(r.Result) == "") {
		return "-", nil
	}
	keys := make([]string, len(targets))
	for i, t := range targets {
		keys[i] = cron.NoticeKey(r.ID, t)
	}
	d, err := outbox.NoteDeliveries(ctx, keys)
	if err != nil {
		return "", err
	}
	lastErr := strings.ReplaceAll(d.LastError, "\n", " ")
	lastErr = textcut.Runes(lastErr, 60, "…")
	switch {
	case d.Notes == 0 && r.NotifyError != "":
		return "not queued: " + r.NotifyError, nil
	case d.Notes == 0:
		return "not queued", nil
	case d.Failed > 0:
		return fmt.Sprintf("failed after %d tries: %s", d.Attempts, lastErr), nil
	case d.Sent == len(targets):
		return "delivered", nil
	case d.Attempts > 0 && lastErr != "":
		return fmt.Sprintf("retrying (%d tries): %s", d.Attempts, lastErr), nil
	}
	return "queued", nil
}

// printReceipts prints runs' receipts whole, one block each.
func printReceipts(ctx context.Context, w io.Writer, outbox *gateway.Store, runs []cron.Run, targets []cron.Target) error {
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Local().Format(time.DateTime + ".000")
	}
	for i, r := range runs {
		notify, err := notifyState(ctx, outbox, r, targets)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "run %s (%s, %s)\n", r.ID, r.Kind, r.Status)
		fmt.Fprintf(w, "  scheduled %s  started %s  ended %s  notified %s\n", at(r.ScheduledAt), at(r.StartedAt), at(r.EndedAt), at(r.NotifiedAt))
		fmt.Fprintf(w, "  session   %s\n", or(string(r.SessionID), "-"))
		fmt.Fprintf(w, "  notify    %s\n", notify)
		if r.Error != "" {
			fmt.Fprintf(w, "  error     %s\n", r.Error)
		}
		fmt.Fprintf(w, "  result    %s\n", or(strings.ReplaceAll(r.Result, "\n", "\n            "), "-"))
	}
	return nil
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
