package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/gateway"
)

// cmdPairing lists, approves, revokes and blocks who may talk to the bot
// in direct chats. It works beside a running daemon: SQLite takes the
// write through its own locking, and the daemon reads the allowlist from
// the database at each message.
func cmdPairing(ctx context.Context, args []string, stdout io.Writer) error {
	sub := args[0] // dispatch has checked it against the command table
	fs := newFlags("pairing " + sub)
	want := 0
	switch sub {
	case "approve":
		want = 1
	case "revoke", "block", "unblock":
		want = 2
	}
	cfg, db, err := fs.open(ctx, args[1:], want)
	if err != nil {
		return err
	}
	defer db.Close()
	store := gateway.NewStore(db, nil)
	switch sub {
	case "approve":
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
	case "revoke", "block", "unblock":
		return changeAccess(ctx, cfg, store, sub, adapters.ID(fs.Arg(0)), fs.Arg(1), stdout)
	case "people":
		people, err := store.People(ctx)
		if err != nil {
			return err
		}
		return printTable(stdout, "no one is approved, waiting or blocked", "CHANNEL\tUSER\tNAME\tSTATE\tSINCE", people, func(p gateway.Person) string {
			state := p.State
			if p.Code != "" {
				state += " (code " + p.Code + ")"
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p.Adapter, p.UserID, p.Name, state, p.Since.Local().Format("2006-01-02 15:04"))
		})
	}
	waiting, err := store.Pairings(ctx)
	if err != nil {
		return err
	}
	return printTable(stdout, "no pairing requests waiting", "CODE\tADAPTER\tUSER\tNAME\tEXPIRES IN", waiting, func(p gateway.Pairing) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p.Code, p.Adapter, p.UserID, p.DisplayName, time.Until(p.ExpiresAt).Round(time.Minute))
	})
}

// changeAccess revokes, blocks or unblocks one person on a channel of the
// config, and says what follows for them.
func changeAccess(ctx context.Context, cfg *config.Config, store *gateway.Store, sub string, channel adapters.ID, user string, stdout io.Writer) error {
	var ids []string
	known := false
	for _, a := range cfg.Adapters {
		ids = append(ids, a.ID)
		known = known || a.ID == string(channel)
	}
	if !known {
		list := strings.Join(ids, ", ")
		if list == "" {
			list = "none"
		}
		return fmt.Errorf("no channel %q in the config (its channels: %s); `parley pairing people` lists who is approved where", channel, list)
	}
	switch sub {
	case "revoke":
		ok, err := store.Revoke(ctx, channel, user)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s was not approved on %s, so there is nothing to revoke; `parley pairing people` lists who is (people in the config's allow list are removed there)", user, channel)
		}
		fmt.Fprintf(stdout, "revoked %s on %s: their next message is refused and gets a new pairing code (under dm_policy pairing); `parley pairing block %s %s` refuses them without one\n",
			user, channel, channel, user)
	case "block":
		ok, err := store.Block(ctx, channel, user)
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintf(stdout, "%s was blocked on %s already\n", user, channel)
			return nil
		}
		fmt.Fprintf(stdout, "blocked %s on %s: their messages are dropped unanswered; `parley pairing unblock %s %s` lets them ask again\n", user, channel, channel, user)
	case "unblock":
		ok, err := store.Unblock(ctx, channel, user)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s was not blocked on %s; `parley pairing people` lists who is", user, channel)
		}
		fmt.Fprintf(stdout, "unblocked %s on %s: their next message gets a pairing code to approve\n", user, channel)
	}
	return nil
}
