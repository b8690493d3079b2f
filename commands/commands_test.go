package commands_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyd/parley/commands"
)

func TestParse(t *testing.T) {
	tests := []struct {
		text string
		want string // "" for not a command
	}{
		{"/reset", "reset"},
		{" /reset \n", "reset"},
		{"/new", "reset"},
		{"/NEW", "reset"},
		{"/STATUS", "status"},
		{"/stop@parleybot", "stop"},
		{"/compact@ParleyBot", "compact"},
		{"/help", "help"},
		{"/nothing-like-a-command", ""},
		{"/reset the counters", ""},
		{"reset", ""},
		{"Run /status checks", ""},
		{"/", ""},
		{"/@bot", ""},
		{"", ""},
		{"/connect github", "connect"},
		{"/connect@bot github", "connect"},
		{"/disconnect", "disconnect"},
		{"/status github", ""},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			c, ok := commands.Parse(tc.text)
			if ok != (tc.want != "") || c.Name != tc.want {
				t.Fatalf("Parse(%q) = %q, %v; want %q", tc.text, c.Name, ok, tc.want)
			}
		})
	}
}

// Every name and alias parses to its command, and no two commands share one.
func TestTableIsConsistent(t *testing.T) {
	seen := map[string]string{}
	for _, c := range commands.All {
		if c.Help == "" {
			t.Errorf("/%s has no help", c.Name)
		}
		if c.Run == nil {
			t.Errorf("/%s does nothing: give its row a Run", c.Name)
		}
		for _, name := range append([]string{c.Name}, c.Aliases...) {
			if other, dup := seen[name]; dup {
				t.Errorf("/%s is both /%s and /%s", name, other, c.Name)
			}
			seen[name] = c.Name
			if got, ok := commands.Parse("/" + name); !ok || got.Name != c.Name {
				t.Errorf("/%s parses as %q, %v", name, got.Name, ok)
			}
		}
	}
}

func TestParseArg(t *testing.T) {
	for _, tc := range []struct{ text, name, arg string }{
		{"/connect github", "connect", "github"},
		{" /connect  github  ghp_x \n", "connect", "github ghp_x"},
		{"/connect", "connect", ""},
		{"/reset", "reset", ""},
	} {
		c, arg, ok := commands.ParseArg(tc.text)
		if !ok || c.Name != tc.name || arg != tc.arg {
			t.Errorf("ParseArg(%q) = %q, %q, %v; want %q, %q", tc.text, c.Name, arg, ok, tc.name, tc.arg)
		}
	}
}

// /help names every command and alias, each with its help.
func TestHelpListsEveryCommand(t *testing.T) {
	help := commands.Help()
	for _, c := range commands.All {
		line := ""
		for _, l := range strings.Split(help, "\n") {
			if strings.HasPrefix(l, "/"+c.Name+" ") || strings.HasPrefix(l, "/"+c.Name+":") {
				line = l
			}
		}
		if line == "" {
			t.Fatalf("/help has no line for /%s: %q", c.Name, help)
		}
		if !strings.Contains(line, c.Help) {
			t.Errorf("/help's line for /%s lacks its help: %q", c.Name, line)
		}
		for _, a := range c.Aliases {
			if !strings.Contains(line, "/"+a) {
				t.Errorf("/help's line for /%s lacks its alias /%s: %q", c.Name, a, line)
			}
		}
	}
}

// Routes names the route of every command that has one.
func TestRoutesNameEveryRoute(t *testing.T) {
	routes := commands.Routes()
	for _, c := range commands.All {
		if c.Route == "" {
			if c.Name != "help" {
				t.Errorf("/%s has no API route", c.Name)
			}
			continue
		}
		if !strings.Contains(routes, "/"+c.Name+": "+c.Route) {
			t.Errorf("Routes() lacks /%s's: %q", c.Name, routes)
		}
	}
}

// fakeRuntime answers each command with its name.
type fakeRuntime struct{}

func (fakeRuntime) Stop(context.Context) (string, error)    { return "stopped", nil }
func (fakeRuntime) Status(context.Context) (string, error)  { return "status", nil }
func (fakeRuntime) Reset(context.Context) (string, error)   { return "reset", nil }
func (fakeRuntime) Compact(context.Context) (string, error) { return "compacted", nil }
func (fakeRuntime) Connect(_ context.Context, p string) (string, error) {
	return "connect " + p, nil
}
func (fakeRuntime) Disconnect(_ context.Context, p string) (string, error) {
	return "disconnect " + p, nil
}
func (fakeRuntime) Model(_ context.Context, m string) (string, error) { return "model " + m, nil }
func (fakeRuntime) Think(_ context.Context, l string) (string, error) { return "think " + l, nil }
func (fakeRuntime) Voice(_ context.Context, s string) (string, error) { return "voice " + s, nil }
func (fakeRuntime) Undo(context.Context) (string, error)              { return "undone", nil }
func (fakeRuntime) Retry(context.Context) (string, error)             { return "retried", nil }

// /think takes off, low, medium or high in any case, or nothing; anything
// else is answered plainly and never reaches the runtime.
func TestThinkLevels(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"/think", "think "},
		{"/think HIGH", "think high"},
		{"/think off", "think off"},
		{"/think extreme", `"extreme" is not a thinking level; use /think off, low, medium or high. Nothing changed.`},
		{"/model", "model "},
		{"/model openai/gpt-4o", "model openai/gpt-4o"},
		{"/undo", "undone"},
		{"/retry", "retried"},
		{"/voice on", "voice on"},
		{"/voice OFF", "voice off"},
		{"/voice", "voice "},
		{"/voice maybe", `"maybe" is not a voice setting; use /voice on or /voice off. Nothing changed.`},
	} {
		c, arg, ok := commands.ParseArg(tc.text)
		if !ok {
			t.Fatalf("%q is not a command", tc.text)
		}
		if got, err := c.Do(context.Background(), fakeRuntime{}, arg); err != nil || got != tc.want {
			t.Errorf("%q ran %q, %v; want %q", tc.text, got, err, tc.want)
		}
	}
}

// A command is one row: added to the table, it parses, is listed by /help
// and runs what its row says, with its argument.
func TestNewCommandIsOneRow(t *testing.T) {
	saved := commands.All
	defer func() { commands.All = saved }()
	commands.All = append(append([]commands.Command{}, saved...), commands.Command{Name: "peek", Help: "show the status, briefly", Arg: "<what>",
		Run: func(ctx context.Context, rt commands.Runtime, arg string) (string, error) {
			s, err := rt.Status(ctx)
			return "peek " + arg + ": " + s, err
		}})
	c, arg, ok := commands.ParseArg("/peek queue")
	if !ok || c.Name != "peek" {
		t.Fatalf("/peek parses as %+v, %v", c, ok)
	}
	if got, err := c.Do(context.Background(), fakeRuntime{}, arg); err != nil || got != "peek queue: status" {
		t.Fatalf("/peek ran %q, %v", got, err)
	}
	if !strings.Contains(commands.Help(), "/peek <what>: show the status, briefly") {
		t.Fatalf("/help doesn't list it:\n%s", commands.Help())
	}
	for _, name := range []string{"stop", "connect"} {
		c, _ := commands.Parse("/" + name)
		if got, _ := c.Do(context.Background(), fakeRuntime{}, "GitHub "); name == "connect" && got != "connect github" {
			t.Fatalf("/connect GitHub ran %q", got)
		}
	}
}
