package config

import (
	"strings"
	"testing"

	"github.com/parleyd/parley/permissions"
)

// Bad permission rules are reported where they are written, saying what
// to write; good ones compile into the policy the daemon runs.
func TestPermissionsConfig(t *testing.T) {
	tests := []struct {
		name, src, want string // want: the only problem; "" for none
	}{
		{"rules", "agents:\n  - id: a\n    permissions:\n      - tool: \"mcp:gh\"\n        action: ASK\n      - tool: gh__delete\n        action: deny\n        pin: true\n" +
			"permissions:\n  ask_timeout: 30s\n  rules:\n    - agent: a\n      user: telegram:1\n      tool: gh__list\n      action: allow\n" +
			"cron:\n  jobs:\n    - id: j\n      schedule: '@daily'\n      prompt: p\n      allow_tools: [gh__list, \"mcp:fs\"]\n", ""},
		{"action", "agents:\n  - id: a\n    permissions:\n      - tool: x\n        action: maybe\n",
			`parley.yaml:5: agents[0].permissions[0].action: "maybe" is not an action; use allow, ask or deny`},
		{"tool", "agents:\n  - id: a\n    permissions:\n      - tool: \"mcp:gh/\"\n        action: allow\n",
			`parley.yaml:4: agents[0].permissions[0].tool: "mcp:gh/": name the tool after the slash, or drop the slash for all of the server's tools`},
		{"project agent", "permissions:\n  rules:\n    - agent: nobody\n      tool: x\n      action: allow\n",
			`parley.yaml:3: permissions.rules[0].agent: "nobody" is not an agent in agents; name one, or leave it out for every agent`},
		{"project user", "permissions:\n  rules:\n    - user: \"12345\"\n      tool: x\n      action: allow\n",
			`parley.yaml:3: permissions.rules[0].user: "12345" names no channel; write "<channel type>:<user id>", e.g. "telegram:123456789"`},
		{"project pin", "permissions:\n  rules:\n    - tool: x\n      action: allow\n      pin: true\n",
			`parley.yaml:5: unknown key "permissions.rules[0].pin" (known keys: agent, user, tool, action)`},
		{"ask timeout", "permissions:\n  ask_timeout: 48h\n",
			`parley.yaml:2: permissions.ask_timeout: 48h0m0s is out of range; use a duration from 1s to 24h, such as "5m"`},
		{"allow_tools", "cron:\n  jobs:\n    - id: j\n      schedule: '@daily'\n      prompt: p\n      allow_tools: [\"a b\"]\n",
			`parley.yaml:6: cron.jobs[0].allow_tools[0]: "a b": tool names have no spaces`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.src), testFile, env(nil))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("problems:\n%v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("got\n%v\nwant\n%s", err, tc.want)
			case tc.want != "":
				return
			}
			if c.Permissions.AskTimeout.Std().String() != "30s" {
				t.Errorf("ask timeout %s", c.Permissions.AskTimeout)
			}
			if _, err := c.PermissionPolicy(); err != nil {
				t.Fatal(err)
			}
			if a := c.Agents[0].Permissions[0].Rule(); a.Decision != permissions.Ask || a.Tool != "mcp:gh" {
				t.Errorf("rule %+v", a)
			}
			if !strings.Contains(strings.Join(c.Cron.Jobs[0].AllowTools, ","), "mcp:fs") {
				t.Errorf("allow_tools %v", c.Cron.Jobs[0].AllowTools)
			}
		})
	}
	if d := Default(); d.Permissions.AskTimeout != Duration(permissions.DefaultAskTimeout) {
		t.Errorf("default ask timeout %s", d.Permissions.AskTimeout)
	}
}
