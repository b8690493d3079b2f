package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/parleyd/parley/daemon"

	"github.com/parleyd/parley/config"
	"go.yaml.in/yaml/v3"
)

// cmdConfig checks a config as `parley run` would, without starting
// anything: the config's own problems, each channel's keys (nothing
// connects), the cron schedules and the agents' tool names, all at once.
func cmdConfig(args []string, stdout io.Writer) error {
	if args[0] == "print" { // dispatch has checked it against the command table
		return cmdConfigPrint(args[1:], stdout)
	}
	fs := newFlags("config check")
	if err := fs.parse(args[1:], 0); err != nil {
		return err
	}
	cfg, used, err := config.LoadForCheck(*fs.config)
	var problems config.Problems
	if err != nil && !errors.As(err, &problems) {
		return err // no file to check
	}
	if cfg != nil {
		problems = append(problems, asProblems(daemon.Check(cfg), used)...)
	}
	if len(problems) == 0 {
		fmt.Fprintf(stdout, "ok: %s\n", config.DisplayPath(used))
		return nil
	}
	slices.SortStableFunc(problems, func(a, b config.Problem) int { return cmp.Compare(lineOrLast(a), lineOrLast(b)) })
	for _, p := range problems {
		fmt.Fprintln(stdout, p.Error())
	}
	return fmt.Errorf("%s: %d problem(s)", config.DisplayPath(used), len(problems))
}

// asProblems lists the problems in err, each error that is not one (a
// channel's own complaint) as a problem of the file.
func asProblems(err error, file string) config.Problems {
	var out config.Problems
	for _, e := range unjoin(err) {
		var ps config.Problems
		var p config.Problem
		switch {
		case errors.As(e, &ps):
			out = append(out, ps...)
		case errors.As(e, &p):
			out = append(out, p)
		default:
			out = append(out, config.Problem{File: file, Message: e.Error()})
		}
	}
	return out
}

func lineOrLast(p config.Problem) int {
	if p.Line == 0 {
		return math.MaxInt
	}
	return p.Line
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

// cmdConfigPrint prints the effective config as YAML: defaults filled in,
// ${VAR} expanded, and every secret as [redacted].
func cmdConfigPrint(args []string, stdout io.Writer) error {
	fs := newFlags("config print")
	cfg, err := fs.load(args, 0)
	if err != nil {
		return err
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("print the config: %w", err)
	}
	fmt.Fprintf(stdout, "# the effective config of %s; secrets are redacted\n%s", config.DisplayPath(fs.used), out)
	return nil
}
