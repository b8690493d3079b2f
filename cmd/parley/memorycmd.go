package main

import (
	"context"
	"fmt"
	"io"
)

func cmdMemory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// dispatch has checked args[0] is reindex, the one subcommand.
	d, err := newFlags("memory reindex").localDaemon(ctx, args[1:], 0, stderr)
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
