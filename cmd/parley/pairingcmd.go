package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/parleyd/parley/gateway"
)

// cmdPairing lists and approves direct-chat pairing requests. It works
// beside a running daemon: SQLite takes the write through its own locking,
// and the daemon reads approvals from the database.
func cmdPairing(ctx context.Context, args []string, stdout io.Writer) error {
	const use = "parley pairing ls | parley pairing approve CODE [--config FILE]"
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, use)
	}
	sub := args[0]
	fs := flag.NewFlagSet("pairing "+sub, flag.ContinueOnError)
	path := configFlag(fs)
	var want int
	switch sub {
	case "ls":
	case "approve":
		want = 1
	default:
		return fmt.Errorf("%w: %s", errUsage, use)
	}
	rest, err := parseFlags(fs, args[1:], want)
	if err != nil {
		return err
	}
	_, db, err := openConfigured(ctx, *path)
	if err != nil {
		return err
	}
	defer db.Close()
	store := gateway.NewStore(db, nil)
	if sub == "approve" {
		p, err := store.ApprovePairing(ctx, rest[0])
		if err != nil {
			return err
		}
		name := p.DisplayName
		if name == "" {
			name = "user " + p.UserID
		}
		fmt.Fprintf(stdout, "approved %s (%s) on %s; they are told so in their chat\n", name, p.UserID, p.Adapter)
		return nil
	}
	waiting, err := store.Pairings(ctx)
	if err != nil {
		return err
	}
	if len(waiting) == 0 {
		fmt.Fprintln(stdout, "no pairing requests waiting")
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CODE\tADAPTER\tUSER\tNAME\tEXPIRES IN")
	for _, p := range waiting {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Code, p.Adapter, p.UserID, p.DisplayName, time.Until(p.ExpiresAt).Round(time.Minute))
	}
	return w.Flush()
}
