package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/parleyd/parley/daemon"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/whatsapp"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/vault"
)

// cmdWhatsApp links a WhatsApp account to a whatsapp adapter: a QR code to
// scan, or a pairing code with --phone. The device is stored in parley's
// own database.
func cmdWhatsApp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// args[0] is link, the one subcommand: dispatch and init check it.
	fs := newFlags("whatsapp link")
	id := fs.String("adapter", "", "the whatsapp adapter to link (default: the only one)")
	phone := fs.String("phone", "", "link with a pairing code for this phone number (international format) instead of a QR code")
	cfg, err := fs.load(args[1:], 0)
	if err != nil {
		return err
	}
	entry, err := whatsappEntry(cfg, *id)
	if err != nil {
		return err
	}
	if t, err := dbutil.ParseURL(cfg.Database.URL.Reveal()); err == nil && t.Dialect == dbutil.SQLite {
		release, err := dbutil.LockSQLite(t.Path)
		if err != nil {
			return fmt.Errorf("%w; stop parley first, link, then start it again", err)
		}
		defer release()
	}
	log := newLogger(stderr, cfg.Log)
	db, _, err := daemon.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	// With a secrets key set, the new device's keys are sealed with it.
	v, err := vault.Open(db, cfg.Secrets.KeyFile)
	if err != nil {
		return err
	}
	a, err := adapters.New(entry.Type, adapters.ID(entry.ID), entry.Decode,
		adapters.Deps{Log: log.With("adapter", entry.ID), DB: db.Writer(), Dialect: string(db.Dialect), Vault: v})
	if err != nil {
		return err
	}
	if err := whatsapp.Link(ctx, a, stdout, *phone); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "linked: %s is ready; start parley with `parley run`\n", entry.ID)
	return nil
}

// whatsappEntry finds the whatsapp adapter to link.
func whatsappEntry(cfg *config.Config, id string) (config.Adapter, error) {
	var found []config.Adapter
	for _, a := range cfg.Adapters {
		if a.Type == "whatsapp" && (id == "" || a.ID == id) {
			found = append(found, a)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0 && id != "":
		return config.Adapter{}, fmt.Errorf("no whatsapp adapter has id %q; add one under adapters with type: whatsapp", id)
	case len(found) == 0:
		return config.Adapter{}, fmt.Errorf("no whatsapp adapter is configured; add one under adapters: {id: wa-main, type: whatsapp}")
	default:
		var ids []string
		for _, a := range found {
			ids = append(ids, a.ID)
		}
		return config.Adapter{}, fmt.Errorf("%w: there are several whatsapp adapters (%s); choose one with --adapter", errUsage, strings.Join(ids, ", "))
	}
}
