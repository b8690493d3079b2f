package commands_test

import (
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
