package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// collecting makes parseFlags hand its flag set to collected instead of
// parsing: how help and completion learn a command's flags from the
// command itself, without running it.
var (
	collecting bool
	collected  *flag.FlagSet
)

// flagSetOf is the flag set of the command at path, or nil for one without.
func flagSetOf(path []string) (*flag.FlagSet, error) {
	c, n := findCommand(path)
	if c == nil || n == 0 {
		return nil, fmt.Errorf("%w: no command %q", errUsage, strings.Join(path, " "))
	}
	if c.name == "help" || c.name == "version" {
		return nil, nil // no flags
	}
	top, _ := findCommand(path[:1])
	collecting, collected = true, nil
	defer func() { collecting, collected = false, nil }()
	s := streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard}
	err := top.run(context.Background(), s, append(append([]string{}, path[1:]...), "--help"))
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return nil, err
	}
	return collected, nil
}

// commandFlags is the flag list of the command at path, as its help shows it.
func commandFlags(path []string) (string, error) {
	fs, err := flagSetOf(path)
	if err != nil || fs == nil {
		return "", err
	}
	var b bytes.Buffer
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String(), nil
}

// completionWords is, for each command path ("", "cron", "cron add"), the
// words that may follow it: subcommands, or flags.
func completionWords() map[string][]string {
	words := map[string][]string{}
	for _, c := range commandTable {
		words[""] = append(words[""], c.name)
		paths := [][]string{{c.name}}
		for _, s := range c.subs {
			words[c.name] = append(words[c.name], s.name)
			paths = append(paths, []string{c.name, s.name})
		}
		for _, p := range paths {
			if len(p) == 1 && len(c.subs) > 0 {
				continue
			}
			if fs, err := flagSetOf(p); err == nil && fs != nil {
				fs.VisitAll(func(f *flag.Flag) { words[strings.Join(p, " ")] = append(words[strings.Join(p, " ")], "--"+f.Name) })
			}
		}
	}
	for _, name := range []string{"help"} {
		words[name] = words[""]
	}
	return words
}

// cmdCompletion prints the completion script for a shell.
func cmdCompletion(_ context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("completion", flag.ContinueOnError)
	rest, err := parseFlags(fs, args, 1)
	if err != nil {
		return err
	}
	words := completionWords()
	switch rest[0] {
	case "bash":
		writeCaseScript(stdout, words,
			"# parley completion for bash: source <(parley completion bash)\n_parley() {\n  local cur=${COMP_WORDS[COMP_CWORD]} path=\"\" w\n"+
				"  for ((i=1; i<COMP_CWORD; i++)); do w=${COMP_WORDS[i]}; [[ $w == -* ]] && continue; path=\"${path:+$path }$w\"; done\n  case \"$path\" in\n",
			"    %q) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n",
			"  esac\n}\ncomplete -o default -F _parley parley\n")
	case "zsh":
		writeCaseScript(stdout, words,
			"#compdef parley\n# parley completion for zsh: parley completion zsh > \"${fpath[1]}/_parley\"\n_parley() {\n  local p=\"\" w\n"+
				"  for w in ${words[2,CURRENT-1]}; do [[ $w == -* ]] && continue; p=\"${p:+$p }$w\"; done\n  case \"$p\" in\n",
			"    %q) compadd -- %s ;;\n",
			"    *) _files ;;\n  esac\n}\ncompdef _parley parley\n")
	case "fish":
		fmt.Fprint(stdout, "# parley completion for fish: parley completion fish > ~/.config/fish/completions/parley.fish\ncomplete -c parley -f\n")
		for _, c := range commandTable {
			fmt.Fprintf(stdout, "complete -c parley -n __fish_use_subcommand -a %s -d %q\n", c.name, c.summary)
			for _, s := range c.subs {
				fmt.Fprintf(stdout, "complete -c parley -n '__fish_seen_subcommand_from %s' -a %s -d %q\n", c.name, s.name, s.summary)
			}
		}
		for _, p := range sortedKeys(words) {
			last := p[strings.LastIndex(p, " ")+1:]
			for _, w := range words[p] {
				if name, ok := strings.CutPrefix(w, "--"); ok && p != "" {
					fmt.Fprintf(stdout, "complete -c parley -n '__fish_seen_subcommand_from %s' -l %s\n", last, name)
				}
			}
		}
	default:
		return fmt.Errorf("%w: no completion for %q; the shells are bash, zsh and fish", errUsage, rest[0])
	}
	return nil
}

// writeCaseScript writes a script that completes with a shell's case over
// the command path typed so far: head, then one branch per path, written
// with branch (a format of the path and its words), then foot.
func writeCaseScript(w io.Writer, words map[string][]string, head, branch, foot string) {
	fmt.Fprint(w, head)
	for _, p := range sortedKeys(words) {
		fmt.Fprintf(w, branch, p, strings.Join(words[p], " "))
	}
	fmt.Fprint(w, foot)
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
