package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

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
	var problems config.Problems
	cfg, used, err := config.LoadOrDefault(*path)
	if err == nil {
		// Each channel checks its own keys as it is built (nothing connects).
		_, err = buildAdapters(cfg, slog.New(slog.DiscardHandler), nil)
		_, cronErr := cronJobs(cfg)
		err = errors.Join(err, cronErr)
		problems = nil
		for _, e := range unjoin(err) {
			var ps config.Problems
			if errors.As(e, &ps) {
				problems = append(problems, ps...)
			} else if e != nil {
				fmt.Fprintln(stdout, e.Error())
			}
		}
		if err != nil && len(problems) == 0 {
			return fmt.Errorf("%s: the channels have problems", displayPath(used))
		}
	} else {
		errors.As(err, &problems)
	}
	if len(problems) > 0 {
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

// unjoin lists the errors inside (nested) errors.Join, or err itself.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
