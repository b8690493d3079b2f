// Command parley is the chat gateway daemon and its command-line tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// errUsage marks an error the user fixes by changing the command line.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals(os.Args[1:])...)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// stopSignals are the signals that stop a command: SIGTERM, and SIGINT
// but under parley chat, where Ctrl-C stops the reply being written.
func stopSignals(args []string) []os.Signal {
	if len(args) > 0 && args[0] == "chat" {
		return []os.Signal{syscall.SIGTERM}
	}
	return []os.Signal{os.Interrupt, syscall.SIGTERM}
}

// run executes one command line and returns the process exit code:
// 0 on success, 1 on failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithInput(ctx, args, os.Stdin, stdout, stderr)
}

// runWithInput is run with the standard input given, for `parley chat`.
func runWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeUsage(stderr)
		return 2
	}
	helpOut = stdout
	err := dispatch(ctx, streams{in: stdin, out: stdout, err: stderr}, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "parley:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "parley:", err)
		return 1
	}
}

// dispatch runs the command args name, through the command table. A group
// run bare or with --help shows its subcommands.
func dispatch(ctx context.Context, s streams, args []string) error {
	switch args[0] {
	case "--help", "-h":
		args = []string{"help"}
	case "--version", "-v":
		args = []string{"version"}
	}
	c, _ := findCommand(args[:1])
	if c == nil {
		return fmt.Errorf("%w: unknown command %q; run \"parley help\" for the list", errUsage, args[0])
	}
	rest := args[1:]
	if len(c.subs) > 0 {
		if len(rest) == 0 {
			writeHelp(s.err, c.name, c, "")
			return fmt.Errorf("%w: parley %s needs a subcommand", errUsage, c.name)
		}
		switch rest[0] {
		case "--help", "-h", "help":
			writeHelp(s.out, c.name, c, "")
			return nil
		}
		if sub, n := findCommand([]string{c.name, rest[0]}); n < 2 || sub == nil {
			return fmt.Errorf("%w: parley %s has no subcommand %q; the subcommands are %s (parley %s --help says more)", errUsage, c.name, rest[0], subNames(c), c.name)
		}
	}
	return c.run(ctx, s, rest)
}

func subNames(c *command) string {
	names := make([]string, len(c.subs))
	for i, s := range c.subs {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// helpOut is where a command's --help goes: the standard output of the
// command line being run.
var helpOut io.Writer = os.Stdout

// parseFlags parses flags that may come before, between or after the
// positional arguments ("sessions show ID --archived"), and returns the
// positionals. want is how many positionals the command takes (-1: any).
func parseFlags(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if collecting {
			collected = fs
			return nil, flag.ErrHelp
		}
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				var flags strings.Builder
				fs.SetOutput(&flags)
				fs.PrintDefaults()
				path := strings.Fields(fs.Name())
				if c, n := findCommand(path); c != nil && n == len(path) {
					writeHelp(helpOut, fs.Name(), c, flags.String())
				} else {
					fmt.Fprintf(helpOut, "Usage of parley %s:\n%s", fs.Name(), flags.String())
				}
				return nil, err
			}
			return nil, fmt.Errorf("%w: %s: %v", errUsage, fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if want >= 0 && len(pos) != want {
		return nil, fmt.Errorf("%w: %s takes %d argument(s), got %d", errUsage, fs.Name(), want, len(pos))
	}
	return pos, nil
}
