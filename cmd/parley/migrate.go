package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/parleyd/parley/daemon"

	"github.com/parleyd/parley/migrations"
)

func cmdMigrate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	path := configFlag(fs)
	if _, err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	cfg, _, err := loadConfigFor(*path, "database")
	if err != nil {
		return err
	}
	db, applied, err := daemon.OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer db.Close()
	current, err := migrations.Version(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s database %s: applied %d migration(s); schema is at version %d\n",
		db.Dialect, cfg.Database.URL, applied, current)
	return nil
}
