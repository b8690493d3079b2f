package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	d, err := startDaemon(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer d.close()
	n, err := d.memory.Reindex(ctx)
	if err != nil {
		return fmt.Errorf("reindex memory: %w", err)
	}
	fmt.Fprintf(stdout, "reindexed %d memory items into the %s index\n", n, d.memory.Index().Name())
	return nil
}
