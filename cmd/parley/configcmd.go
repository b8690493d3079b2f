package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/parleyd/parley/config"
)

func cmdConfig(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("%w: parley config check [--config FILE]", errUsage)
	}
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	path := configFlag(fs)
	if _, err := parseFlags(fs, args[1:], 0); err != nil {
		return err
	}
	_, used, err := config.LoadOrDefault(*path)
	var problems config.Problems
	if errors.As(err, &problems) {
		for _, p := range problems {
			fmt.Fprintln(stdout, p.Error())
		}
		return fmt.Errorf("%s: %d problem(s)", displayPath(used), len(problems))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ok: %s\n", displayPath(used))
	return nil
}
