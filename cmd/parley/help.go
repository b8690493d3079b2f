package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// writeUsage lists every command, for `parley help` and a bare `parley`.
func writeUsage(w io.Writer) {
	fmt.Fprint(w, "parley: a chat gateway between people and LLM agents.\n\nUsage:\n  parley COMMAND [SUBCOMMAND] [flags]\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commandTable {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
		for _, s := range c.subs {
			fmt.Fprintf(tw, "    %s %s\t%s\n", c.name, s.name, s.summary)
		}
	}
	tw.Flush()
	fmt.Fprint(w, `
Run "parley help COMMAND" or "parley COMMAND --help" for a command's flags and examples.
Without --config, parley reads $PARLEY_CONFIG, then ./parley.yaml, and
otherwise runs on its built-in defaults (SQLite at data/parley.db).
`)
}

// writeHelp is a command's help: what it does, its usage, its subcommands
// or flags, and examples. flags is its flag list ("" for none).
func writeHelp(w io.Writer, path string, c *command, flags string) {
	fmt.Fprintf(w, "parley %s: %s\n\nUsage:\n", path, c.summary)
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "  parley %s SUBCOMMAND [flags]\n", path)
	} else {
		fmt.Fprintf(w, "  parley %s\n", strings.TrimSpace(path+" "+c.args))
	}
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(c.about, 76))
	}
	if len(c.subs) > 0 {
		fmt.Fprint(w, "\nSubcommands:\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, s := range c.subs {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.name, s.args, s.summary)
		}
		tw.Flush()
	}
	if flags != "" {
		fmt.Fprintf(w, "\nFlags:\n%s", flags)
	}
	if len(c.examples) > 0 {
		fmt.Fprint(w, "\nExamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "\nRun \"parley %s SUBCOMMAND --help\" for a subcommand's flags and examples.\n", path)
	}
}

// wrap folds text at width columns, between words.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		if i > 0 && n+1+len(word) > width {
			b.WriteByte('\n')
			n = 0
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

// cmdHelp is `parley help [COMMAND [SUBCOMMAND]]`: a leaf command's help
// comes from its own --help, which adds its flags.
func cmdHelp(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		writeUsage(stdout)
		return nil
	}
	c, n := findCommand(args)
	if n < len(args) {
		return fmt.Errorf("%w: no command %q; run \"parley help\" for the list", errUsage, strings.Join(args, " "))
	}
	if len(c.subs) > 0 || c.name == "help" || c.name == "version" || c.name == "completion" {
		writeHelp(stdout, strings.Join(args, " "), c, "")
		return nil
	}
	flags, err := commandFlags(args)
	if err != nil {
		return err
	}
	writeHelp(stdout, strings.Join(args, " "), c, flags)
	return nil
}
