package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/parleyd/parley/daemon"

	"github.com/parleyd/parley/migrations"
)

func cmdMigrate(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := newFlags("migrate").load(args, 0, "database")
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
