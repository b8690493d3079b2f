package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// A server id can't hold "__" or end in '_': "__" separates the server
// from the tool, and such an id would put one server's tools under
// another's names and rules (a rule "mcp:a" is "a__*", which "a___x" of
// a server "a_" matches).
func TestMCPServerIDsKeepServersApart(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"a__b", `may not hold "__"`},
		{"a_", `may not hold "__" or end in '_'`},
		{"A", "is not a server id"},
		{"_a", "is not a server id"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			_, err := Parse([]byte("mcp: {servers: [{id: '"+tc.id+"', command: x}]}"), testFile, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	for _, id := range []string{"a", "a_b", "a-b_c", "gh2"} {
		mustParse(t, "mcp: {servers: [{id: '"+id+"', command: x}]}", nil)
	}
}

// A stdio server inherits PATH, HOME and LANG of parley's environment
// unless inherit_env says otherwise; [] is none. The caps have defaults.
func TestMCPServerProcessKeys(t *testing.T) {
	c := mustParse(t, "mcp: {servers: [{id: a, command: x}, {id: b, command: x, inherit_env: [], run_as: '1001:1001'}, {id: c, command: x, inherit_env: [TZ], run_as: mcp}, {id: d, url: 'http://x/mcp'}]}", nil)
	s := c.MCP.Servers
	if !slices.Equal(s[0].InheritEnv, []string{"PATH", "HOME", "LANG"}) || s[1].InheritEnv == nil || len(s[1].InheritEnv) != 0 ||
		!slices.Equal(s[2].InheritEnv, []string{"TZ"}) || s[3].InheritEnv != nil {
		t.Fatalf("inherit_env: %q %q %q %q", s[0].InheritEnv, s[1].InheritEnv, s[2].InheritEnv, s[3].InheritEnv)
	}
	if s[1].RunAs != "1001:1001" || s[2].RunAs != "mcp" || s[0].RunAs != "" {
		t.Fatalf("run_as: %q %q %q", s[0].RunAs, s[1].RunAs, s[2].RunAs)
	}
	if s[0].MaxResultKB != DefaultMCPMaxResultKB || s[0].MaxMessageMB != DefaultMCPMaxMessageMB {
		t.Fatalf("caps: %d KiB, %d MiB", s[0].MaxResultKB, s[0].MaxMessageMB)
	}
	for _, tc := range []struct{ name, src, want string }{
		{"bad inherit", "mcp: {servers: [{id: a, command: x, inherit_env: ['A B']}]}", "inherit_env[0]: \"A B\" is not an environment variable name"},
		{"inherit on url", "mcp: {servers: [{id: a, url: 'http://x/mcp', inherit_env: [PATH]}]}", "only a stdio server (command) has an environment"},
		{"run_as on url", "mcp: {servers: [{id: a, url: 'http://x/mcp', run_as: mcp}]}", "only a stdio server (command) runs as a user"},
		{"bad run_as", "mcp: {servers: [{id: a, command: x, run_as: 'root; rm'}]}", "is not a user"},
		{"negative result cap", "mcp: {servers: [{id: a, command: x, max_result_kb: -1}]}", "max_result_kb: must not be negative"},
		{"message under result", "mcp: {servers: [{id: a, command: x, max_result_kb: 8192, max_message_mb: 2}]}", "is less than max_result_kb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// Printing the config (YAML, JSON) shows an MCP server's URL with its
// password and query values hidden, as any token may sit there.
func TestMCPServerURLPrintsRedacted(t *testing.T) {
	c := mustParse(t, "mcp: {servers: [{id: a, url: 'https://bob:pw-0123456789@mcp.example.com/mcp?apiKey=q-0123456789&team=x'}]}", nil)
	printed, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	asJSON, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{string(printed), string(asJSON)} {
		if strings.Contains(out, "0123456789") || !strings.Contains(out, "mcp.example.com/mcp?apiKey=[redacted]") || !strings.Contains(out, "bob:[redacted]@") {
			t.Errorf("printed:\n%s", out)
		}
	}
	if c.MCP.Servers[0].URL != "https://bob:pw-0123456789@mcp.example.com/mcp?apiKey=q-0123456789&team=x" {
		t.Errorf("the URL itself changed: %s", c.MCP.Servers[0].URL)
	}
}

// A server's retry policy defaults to one attempt; a tool's takes what it
// leaves out from its server's; bad values name what to change.
func TestMCPRetryPolicies(t *testing.T) {
	c := mustParse(t, "mcp: {servers: [{id: a, command: x}, {id: b, command: x, retry: {attempts: 3, backoff: 2s, on: [unavailable]}, tool_retry: [{tool: read, attempts: 5}, {tool: write, attempts: 1}]}]}", nil)
	a, b := c.MCP.Servers[0], c.MCP.Servers[1]
	if r := a.For("anything"); r.Attempts != 1 || r.Backoff != DefaultRetryBackoff || !slices.Equal(r.On, RetryClasses) {
		t.Fatalf("default policy: %+v", r)
	}
	if r := b.For("other"); r.Attempts != 3 || r.Backoff != Duration(2*time.Second) || !slices.Equal(r.On, []string{"unavailable"}) {
		t.Fatalf("server policy: %+v", r)
	}
	if r := b.For("read"); r.Attempts != 5 || r.Backoff != Duration(2*time.Second) || !slices.Equal(r.On, []string{"unavailable"}) {
		t.Fatalf("a tool's policy, the rest its server's: %+v", r)
	}
	if r := b.For("write"); r.Attempts != 1 {
		t.Fatalf("a tool kept to one try: %+v", r)
	}
	for _, tc := range []struct{ name, src, want string }{
		{"attempts", "mcp: {servers: [{id: a, command: x, retry: {attempts: 11}}]}", "mcp.servers[0].retry.attempts: 11 is out of range; use 1 (no retry) to 10 tries in all"},
		{"backoff", "mcp: {servers: [{id: a, command: x, retry: {attempts: 2, backoff: 1h}}]}", "retry.backoff: 1h0m0s is out of range; use 0s to 5m"},
		{"class", "mcp: {servers: [{id: a, command: x, retry: {attempts: 2, on: [flaky]}}]}", `retry.on[0]: "flaky" is not a failure class; use timeout, unavailable, rate_limited`},
		{"tool without a name", "mcp: {servers: [{id: a, command: x, tool_retry: [{attempts: 2}]}]}", "tool_retry[0].tool: name one of the server's tools"},
		{"a tool twice", "mcp: {servers: [{id: a, command: x, tool_retry: [{tool: r, attempts: 2}, {tool: r, attempts: 3}]}]}", `tool_retry[1].tool: "r" has two retry policies`},
		{"a tool's class", "mcp: {servers: [{id: a, command: x, tool_retry: [{tool: r, on: [slow]}]}]}", `tool_retry[0].on[0]: "slow" is not a failure class`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// Session hooks: each bad key says what to change.
func TestSessionHookChecks(t *testing.T) {
	const good = "session_hooks: [{url: 'https://hooks.example.com/parley', secret: 5e2b7c9d1f3a4e6b8c0d2f4a6b8c0e1d3f5a7b9c1d3e5f7a9b0c2d4e6f8a1b3c"
	c := mustParse(t, good+", events: [message.user], sync_timeout: 3s}]", nil)
	if h := c.SessionHooks[0]; !h.Wants("message.user", "default") || h.Wants("session.created", "default") || h.SyncTimeout.Std() != 3*time.Second {
		t.Fatalf("hook %+v", h)
	}
	for _, tc := range []struct{ name, src, want string }{
		{"url", "session_hooks: [{url: 'ftp://x', secret: 5e2b7c9d1f3a4e6b8c0d2f4a6b8c0e1d3f5a7b9c1d3e5f7a9b0c2d4e6f8a1b3c}]", `session_hooks[0].url: "ftp://x" is not an http:// or https:// URL`},
		{"no secret", "session_hooks: [{url: 'https://x/y'}]", "session_hooks[0].secret: is empty; every event is signed with it"},
		{"weak secret", "session_hooks: [{url: 'https://x/y', secret: hunter2}]", "session_hooks[0].secret:"},
		{"event", good + ", events: [session.exploded]}]", `session_hooks[0].events[0]: "session.exploded" is not an event; use session.created`},
		{"agent", good + ", agents: [nobody]}]", `session_hooks[0].agents[0]: "nobody" is not an agent`},
		{"sync too long", good + ", sync_timeout: 5m}]", "session_hooks[0].sync_timeout: 5m0s is out of range"},
		{"sync without message.user", good + ", events: [session.created], sync_timeout: 2s}]", "applies to message.user, which events leaves out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
