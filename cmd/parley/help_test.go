package main

import (
	"context"
	"flag"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Every command and subcommand has help: what it does, its usage line and
// examples, and a leaf its flags; `parley help X Y` is `parley X Y --help`.
func TestEveryCommandHasHelp(t *testing.T) {
	ctx := context.Background()
	for _, c := range commandTable {
		paths := [][]string{{c.name}}
		for _, s := range c.subs {
			paths = append(paths, []string{c.name, s.name})
		}
		for _, p := range paths {
			name := strings.Join(p, " ")
			code, out, errOut := parley(t, ctx, append(append([]string{}, p...), "--help")...)
			if p[0] == "help" || p[0] == "version" || p[0] == "completion" {
				code, out, errOut = parley(t, ctx, "help", p[0])
			}
			if code != 0 || !strings.Contains(out, "parley "+name+": ") || !strings.Contains(out, "Usage:\n  parley "+name) {
				t.Errorf("parley %s --help: exit %d\n%s%s", name, code, out, errOut)
				continue
			}
			c, _ := findCommand(p)
			if len(c.subs) > 0 {
				for _, s := range c.subs {
					if !strings.Contains(out, "  "+s.name+" ") {
						t.Errorf("parley %s --help doesn't list %s:\n%s", name, s.name, out)
					}
				}
				continue
			}
			if p[0] != "version" && !strings.Contains(out, "\nExamples:\n  parley ") && !strings.Contains(out, "\nExamples:\n  source ") {
				t.Errorf("parley %s --help has no examples:\n%s", name, out)
			}
			if fs, err := flagSetOf(p); err != nil {
				t.Errorf("flags of %s: %v", name, err)
			} else if fs != nil {
				fs.VisitAll(func(f *flag.Flag) {
					if !strings.Contains(out, "\nFlags:\n") || !strings.Contains(out, "  -"+f.Name) {
						t.Errorf("parley %s --help doesn't show its flag -%s:\n%s", name, f.Name, out)
					}
				})
			}
			if _, viaHelp, _ := parley(t, ctx, append([]string{"help"}, p...)...); viaHelp != out {
				t.Errorf("parley help %s differs from parley %s --help:\n%s\n---\n%s", name, name, viaHelp, out)
			}
		}
	}
}

// A group named alone shows its subcommands and exits 2; with --help it
// exits 0; an unknown subcommand names the real ones.
func TestGroupCommands(t *testing.T) {
	ctx := context.Background()
	code, _, errOut := parley(t, ctx, "cron")
	if code != 2 || !strings.Contains(errOut, "Subcommands:") || !strings.Contains(errOut, "runs") {
		t.Fatalf("parley cron: exit %d %q", code, errOut)
	}
	for _, h := range []string{"--help", "-h", "help"} {
		if code, out, _ := parley(t, ctx, "cron", h); code != 0 || !strings.Contains(out, "Subcommands:") {
			t.Fatalf("parley cron %s: exit %d %q", h, code, out)
		}
	}
	code, _, errOut = parley(t, ctx, "cron", "nope")
	if code != 2 || !strings.Contains(errOut, `no subcommand "nope"`) || !strings.Contains(errOut, "add, ls, rm") {
		t.Fatalf("parley cron nope: exit %d %q", code, errOut)
	}
	if code, _, errOut := parley(t, ctx, "help", "nope"); code != 2 || !strings.Contains(errOut, `no command "nope"`) {
		t.Fatalf("parley help nope: exit %d %q", code, errOut)
	}
}

// The bash script completes commands, subcommands and a leaf's flags, run
// by bash itself.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	code, script, errOut := parley(t, context.Background(), "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: %d %q", code, errOut)
	}
	for line, want := range map[string]string{
		"parley cr":            "cron",
		"parley cron ru":       "run runs",
		"parley cron add --sc": "--schedule",
		"parley config ":       "check print",
	} {
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" + itoa(len(words)-1) + "; _parley; echo \"${COMPREPLY[*]}\""
		out, err := exec.Command(bash, "-c", prog).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%q completes to %q (%v), want %q", line, strings.TrimSpace(string(out)), err, want)
		}
	}
	for _, shell := range []string{"zsh", "fish"} {
		if code, out, _ := parley(t, context.Background(), "completion", shell); code != 0 || !strings.Contains(out, "cron") || !strings.Contains(out, "schedule") {
			t.Errorf("completion %s: exit %d\n%s", shell, code, out)
		}
	}
	if code, _, errOut := parley(t, context.Background(), "completion", "tcsh"); code != 2 || !strings.Contains(errOut, "bash, zsh and fish") {
		t.Errorf("completion tcsh: exit %d %q", code, errOut)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// config print shows the effective config with every secret redacted.
func TestConfigPrintRedactsSecrets(t *testing.T) {
	const token = "print-me-never-0123456789abcdef0123"
	path, _ := writeConfig(t, "http:\n  tokens: [\""+token+"\"]\nproviders:\n  openai:\n    api_key: sk-never-printed-123456\n")
	code, out, errOut := parley(t, context.Background(), "config", "print", "--config", path)
	if code != 0 || !strings.Contains(out, "tokens:") || !strings.Contains(out, "[redacted]") || !strings.Contains(out, "listen: 127.0.0.1:8080") {
		t.Fatalf("config print: exit %d\n%s%s", code, out, errOut)
	}
	for _, s := range []string{token, "sk-never-printed"} {
		if strings.Contains(out, s) {
			t.Fatalf("config print shows a secret:\n%s", out)
		}
	}
}
