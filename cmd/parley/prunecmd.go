package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/sessions"
)

// cmdSessionsPrune deletes the sessions archived longer ago than
// --older-than, with their messages; active sessions are never deleted.
func cmdSessionsPrune(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("sessions prune")
	olderThan := fs.String("older-than", "", "delete sessions archived longer ago than this: 30d, 12h, 90m (required)")
	if err := fs.parse(args, 0); err != nil {
		return err
	}
	if *olderThan == "" {
		return fmt.Errorf("%w: --older-than is required, e.g. parley sessions prune --older-than 30d", errUsage)
	}
	age, err := parseAge(*olderThan)
	if err != nil {
		return fmt.Errorf("%w: --older-than: %v", errUsage, err)
	}
	store, done, err := openSessions(ctx, *fs.config)
	if err != nil {
		return err
	}
	defer done()
	before := time.Now().Add(-age)
	res, err := store.PruneArchived(ctx, before)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, pruneLine(res, before))
	return nil
}

// pruneLine says what a prune removed, in a line for a person.
func pruneLine(res sessions.PruneResult, before time.Time) string {
	return fmt.Sprintf("removed %d archived sessions (%d messages) archived before %s", res.Sessions, res.Messages,
		before.UTC().Format(time.RFC3339))
}

// parseAge reads an age such as "30d", "12h" or "90m": a Go duration, or
// whole days with "d". It must be above zero.
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("%q is not an age; use whole days (30d) or a duration (12h, 90m)", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not an age; use whole days (30d) or a duration (12h, 90m)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not above zero", s)
	}
	return d, nil
}
