package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
)

func cmdSessions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch args[0] { // dispatch has checked it against the command table
	case "ls":
		return cmdSessionsList(ctx, args[1:], stdout)
	case "show":
		return cmdSessionsShow(ctx, args[1:], stdout)
	case "compact":
		return cmdSessionsCompact(ctx, args[1:], stdout, stderr)
	default: // prune
		return cmdSessionsPrune(ctx, args[1:], stdout)
	}
}

// cmdSessionsCompact compacts one session now. It runs the agent (the
// memory flush and the summary), so it takes the database as the daemon
// would; while `parley run` holds a SQLite database, send /compact in the
// chat instead.
func cmdSessionsCompact(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sessions compact")
	d, err := fs.localDaemon(ctx, args, 1, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	line, err := d.CompactSession(ctx, sessions.ID(fs.Arg(0)))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, line)
	return nil
}

// openSessions opens the session store of the configured database; the
// function returned closes it.
func openSessions(ctx context.Context, configPath string) (*sessions.SQLStore, func(), error) {
	cfg, db, err := openConfigured(ctx, configPath, "memory")
	if err != nil {
		return nil, nil, err
	}
	// Deleting or pruning a session deletes every copy of its text, as
	// the daemon's store does.
	store := sessions.NewStore(db, sessions.WithDeleteHook(gateway.ForgetSessions), sessions.WithDeleteHook(cron.ForgetSessions),
		sessions.WithDeleteHook(memory.ForgetSessions(cfg.Memory.Index == "typesense")))
	return store, func() { db.Close() }, nil
}

func cmdSessionsList(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("sessions ls")
	status := fs.String("status", "", "only sessions with this status: active or archived")
	surface := fs.String("surface", "", "only sessions on this surface, e.g. telegram, cron, cli")
	agent := fs.String("agent", "", "only sessions of this agent")
	limit := fs.Int("limit", 50, fmt.Sprintf("page size, 1-%d", sessions.MaxPageSize))
	cursor := fs.String("cursor", "", "continue from the cursor a previous page printed")
	asJSON := fs.Bool("json", false, "print JSON: {sessions, next_cursor}")
	if err := fs.parse(args, 0); err != nil {
		return err
	}
	if *limit < 1 || *limit > sessions.MaxPageSize {
		return fmt.Errorf("%w: --limit %d is out of range; use 1 to %d", errUsage, *limit, sessions.MaxPageSize)
	}
	if *status != "" && *status != string(sessions.StatusActive) && *status != string(sessions.StatusArchived) {
		return fmt.Errorf("%w: --status %q; use active or archived", errUsage, *status)
	}
	store, done, err := openSessions(ctx, *fs.config)
	if err != nil {
		return err
	}
	defer done()
	page, err := store.List(ctx, sessions.ListOptions{
		Limit: *limit, Cursor: *cursor, Status: sessions.Status(*status), Surface: *surface, AgentID: *agent,
	})
	if err != nil {
		return err
	}
	if *asJSON {
		page.Sessions = nonNil(page.Sessions)
		return printJSON(stdout, page)
	}
	err = printTable(stdout, "no sessions", "ID\tKEY\tAGENT\tSTATUS\tMESSAGES\tTOKENS\tLAST ACTIVE\tTITLE", page.Sessions, func(s sessions.Session) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s", s.ID, s.Key, s.Key.AgentID, s.Status,
			s.MessageCount, s.Rollup.TokenCount, s.LastActiveAt.Local().Format(time.DateTime), s.Title)
	})
	if err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(stdout, "more: parley sessions ls --limit %d --cursor %s\n", *limit, page.Next)
	}
	return nil
}

func cmdSessionsShow(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("sessions show")
	archived := fs.Bool("archived", false, "the full history, including messages compaction archived")
	hidden := fs.Bool("hidden", false, "include rewound (hidden) messages")
	asJSON := fs.Bool("json", false, "print JSON: {session, messages}")
	if err := fs.parse(args, 1); err != nil {
		return err
	}
	store, done, err := openSessions(ctx, *fs.config)
	if err != nil {
		return err
	}
	defer done()
	id := sessions.ID(fs.Arg(0))
	s, err := store.Session(ctx, id)
	if err != nil {
		return fmt.Errorf("%w; list sessions with \"parley sessions ls\"", err)
	}
	msgs, err := store.Messages(ctx, id, sessions.MessagesOptions{Archived: *archived, Hidden: *hidden})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, struct {
			Session  sessions.Session   `json:"session"`
			Messages []sessions.Message `json:"messages"`
		}{s, nonNil(msgs)})
	}
	printSession(stdout, s)
	for _, m := range msgs {
		printMessage(stdout, m)
	}
	if len(msgs) == 0 {
		fmt.Fprintln(stdout, "(no messages)")
	}
	return nil
}

func printSession(w io.Writer, s sessions.Session) {
	fmt.Fprintf(w, "session %s  %s  agent %s  %s\n", s.ID, s.Key, s.Key.AgentID, s.Status)
	if s.Title != "" {
		fmt.Fprintf(w, "title: %s\n", s.Title)
	}
	if s.Key.UserID != "" {
		fmt.Fprintf(w, "user: %s\n", s.Key.UserID)
	} else {
		fmt.Fprintln(w, "user: (group: shared by every member)")
	}
	fmt.Fprintf(w, "created %s, last active %s", s.CreatedAt.Local().Format(time.DateTime), s.LastActiveAt.Local().Format(time.DateTime))
	if s.Status == sessions.StatusArchived {
		fmt.Fprintf(w, ", archived %s (%s reset)", s.ArchivedAt.Local().Format(time.DateTime), s.ResetReason)
	}
	fmt.Fprintln(w)
	r := s.Rollup
	fmt.Fprintf(w, "%d messages, ~%d tokens in context; usage: %d prompt, %d completion, %d reasoning, %d cache read, %d cache write, $%.4f\n\n",
		s.MessageCount, r.TokenCount, r.PromptTokens, r.CompletionTokens, r.ReasoningTokens, r.CacheRead, r.CacheWrite, r.CostUSD)
}

func printMessage(w io.Writer, m sessions.Message) {
	var tags []string
	if m.Summary {
		tags = append(tags, "summary")
	}
	if m.Synthetic {
		tags = append(tags, "synthetic")
	}
	if m.Archived() {
		tags = append(tags, "archived")
	}
	if !m.HiddenAt.IsZero() {
		tags = append(tags, "hidden")
	}
	head := fmt.Sprintf("#%d %s %s", m.Seq, m.CreatedAt.Local().Format(time.DateTime), m.Role)
	if m.Model != "" {
		head += " (" + m.Model + ")"
	}
	if len(tags) > 0 {
		head += " [" + strings.Join(tags, ", ") + "]"
	}
	fmt.Fprintln(w, head)
	if m.Content != "" {
		fmt.Fprintln(w, indent(m.Content))
	}
	for _, c := range m.ToolCalls {
		fmt.Fprintf(w, "  -> %s(%s) [%s]\n", c.Name, c.Arguments, c.ID)
	}
	if m.ToolCallID != "" {
		fmt.Fprintf(w, "  (result of %s)\n", m.ToolCallID)
	}
	fmt.Fprintln(w)
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
