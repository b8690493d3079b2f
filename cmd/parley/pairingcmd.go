package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/parleyd/parley/gateway"
)

// cmdPairing lists and approves direct-chat pairing requests. It works
// beside a running daemon: SQLite takes the write through its own locking,
// and the daemon reads approvals from the database.
func cmdPairing(ctx context.Context, args []string, stdout io.Writer) error {
	sub := args[0] // dispatch has checked it against the command table
	fs := newFlags("pairing " + sub)
	want := 0
	if sub == "approve" {
		want = 1
	}
	_, db, err := fs.open(ctx, args[1:], want)
	if err != nil {
		return err
	}
	defer db.Close()
	store := gateway.NewStore(db, nil)
	if sub == "approve" {
		p, err := store.ApprovePairing(ctx, fs.Arg(0))
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
	return printTable(stdout, "no pairing requests waiting", "CODE\tADAPTER\tUSER\tNAME\tEXPIRES IN", waiting, func(p gateway.Pairing) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p.Code, p.Adapter, p.UserID, p.DisplayName, time.Until(p.ExpiresAt).Round(time.Minute))
	})
}
