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
	"syscall"
)

const usage = `parley: a chat gateway between people and LLM agents.

Usage:
  parley run [--config FILE]                 start the daemon
  parley chat [--config FILE]                talk to the local agent in this terminal
  parley chat --server URL [--token T]       talk to a running parley through its HTTP API
  parley config check [--config FILE]        report every problem parley run would refuse
  parley migrate [--config FILE]             apply pending database migrations
  parley sessions ls [flags]                 list sessions
  parley sessions show ID [--archived]       show a session and its messages
  parley sessions compact ID                 summarize a session's older messages now
  parley memory reindex [--config FILE]      rebuild the memory search index from the database
  parley cron add|ls|rm ID|run ID|runs ID     manage scheduled jobs and read their receipts
  parley hooks ls [--config FILE]            list the incoming webhooks and their URLs
  parley hooks deliveries ID [--limit N]     a webhook's latest deliveries
  parley whatsapp link [--adapter ID] [--phone N]
                                             link a WhatsApp account (QR code, or a pairing code)
  parley pairing ls [--config FILE]          list direct-chat pairing requests waiting
  parley pairing approve CODE [--config FILE]
                                             let a pairing code's sender talk to the bot
  parley bench [--sessions N] [--turns M] [--database URL] [--json]
                                             measure the whole path in process
  parley bench --idle [--runs N] [--json]    measure an idle daemon's start and RSS
  parley version                             print the version

Run "parley COMMAND --help" for a command's flags.
Without --config, parley reads $PARLEY_CONFIG, then ./parley.yaml, and
otherwise runs on its built-in defaults (SQLite at data/parley.db).
`

// errUsage marks an error the user fixes by changing the command line.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code:
// 0 on success, 1 on failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithInput(ctx, args, os.Stdin, stdout, stderr)
}

// runWithInput is run with the standard input given, for `parley chat`.
func runWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		err = cmdRun(ctx, rest, stderr)
	case "chat":
		err = cmdChat(ctx, rest, stdin, stdout, stderr)
	case "bench":
		err = cmdBench(ctx, rest, stdout, stderr)
	case "config":
		err = cmdConfig(rest, stdout)
	case "migrate":
		err = cmdMigrate(ctx, rest, stdout)
	case "sessions":
		err = cmdSessions(ctx, rest, stdout, stderr)
	case "memory":
		err = cmdMemory(ctx, rest, stdout, stderr)
	case "pairing":
		err = cmdPairing(ctx, rest, stdout)
	case "hooks":
		err = cmdHooks(ctx, rest, stdout)
	case "cron":
		err = cmdCron(ctx, rest, stdout)
	case "whatsapp":
		err = cmdWhatsApp(ctx, rest, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "parley", version())
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
	default:
		err = fmt.Errorf("%w: unknown command %q; run \"parley help\" for the list", errUsage, cmd)
	}
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

// parseFlags parses flags that may come before, between or after the
// positional arguments ("sessions show ID --archived"), and returns the
// positionals. want is how many positionals the command takes.
func parseFlags(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(os.Stdout)
				fs.Usage()
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
	if len(pos) != want {
		return nil, fmt.Errorf("%w: %s takes %d argument(s), got %d", errUsage, fs.Name(), want, len(pos))
	}
	return pos, nil
}
