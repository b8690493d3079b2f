package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/parleyd/parley/daemon"
)

func cmdMemory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "reindex" {
		return fmt.Errorf("%w: parley memory reindex [--config FILE]", errUsage)
	}
	fs := flag.NewFlagSet("memory reindex", flag.ContinueOnError)
	path := configFlag(fs)
	if _, err := parseFlags(fs, args[1:], 0); err != nil {
		return err
	}
	cfg, _, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.Log)
	d, err := daemon.New(ctx, cfg, log, daemon.WithChannels(nil))
	if err != nil {
		return err
	}
	defer d.Close()
	n, index, err := d.ReindexMemory(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "reindexed %d memory items into the %s index\n", n, index)
	return nil
}
