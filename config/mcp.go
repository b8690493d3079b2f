package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/parleyd/parley/internal/lazyregexp"
	"github.com/parleyd/parley/secret"
)

// MCP is the Model Context Protocol servers whose tools agents may use.
type MCP struct {
	Servers []MCPServer `yaml:"servers"`
}

// MCPServer is one MCP server: a command parley starts (stdio) or a URL
// it connects to (streamable HTTP). Agents name its tools in their tools
// list as "mcp:<id>" (all of them) or "mcp:<id>/<tool>".
type MCPServer struct {
	ID string `yaml:"id"`
	// Command and Args start a stdio server; its environment is Env
	// ("NAME=value"; values are secrets: never logged) and the variables
	// of parley's own that InheritEnv names, nothing else.
	Command string   `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     Pairs    `yaml:"env"`
	// InheritEnv names the variables of parley's environment a stdio
	// server gets. Default: PATH, HOME, LANG; [] for none.
	InheritEnv []string `yaml:"inherit_env"`
	// RunAs is the user a stdio server runs as: a name, or uid[:gid]
	// (parley needs the right to switch users). Default: parley's user
	RunAs string `yaml:"run_as"`
	// URL is a streamable HTTP server; Headers ("Name: value") go with each
	// request (values are secrets).
	URL     string `yaml:"url"`
	Headers Pairs  `yaml:"headers"`
	// Timeout bounds each tool call. Default: 60s
	Timeout Duration `yaml:"timeout"`
	// MaxResultKB caps, in KiB, a tool result the model is given: more is
	// cut, with a note saying so. Default: 256
	MaxResultKB int `yaml:"max_result_kb"`
	// MaxMessageMB caps, in MiB, one message from the server: a longer
	// one ends the connection. Default: 4
	MaxMessageMB int `yaml:"max_message_mb"`
	// UserToken, when its provider is set, makes each person's calls use
	// their own token for that provider (/connect <provider>): in an
	// environment variable of a server process of their own (stdio), or
	// in a header of each request (HTTP).
	UserToken UserToken `yaml:"user_token"`
	// Retry tries a call of the server's tools that failed in one of its
	// classes again. Default: 1 attempt (no retry)
	Retry Retry `yaml:"retry"`
	// ToolRetry overrides Retry for one tool each.
	ToolRetry []ToolRetry `yaml:"tool_retry"`
}

// Retry is a retry policy for tool calls: a call that fails in one of the
// classes On is tried again, Attempts tries in all, Backoff before the
// second and twice as long before each one after.
type Retry struct {
	Attempts int      `yaml:"attempts"`
	Backoff  Duration `yaml:"backoff"`
	On       []string `yaml:"on"`
}

// ToolRetry is one tool's retry policy; what it leaves unset is its
// server's.
type ToolRetry struct {
	Tool     string   `yaml:"tool"`
	Attempts int      `yaml:"attempts"`
	Backoff  Duration `yaml:"backoff"`
	On       []string `yaml:"on"`
}

// RetryClasses are the failures a retry policy may name: timeout (the
// call took longer than timeout), unavailable (the server could not be
// reached or broke off), rate_limited (it said to slow down).
var RetryClasses = []string{"timeout", "unavailable", "rate_limited"}

// The retry policy when a server sets none: one attempt; when it is raised,
// the first retry waits a second, for the failures a second try may mend.
const (
	DefaultRetryAttempts = 1
	DefaultRetryBackoff  = Duration(time.Second)
)

// For is the retry policy of the server's tool named tool (its own name,
// without the server's prefix).
func (s MCPServer) For(tool string) Retry {
	for _, t := range s.ToolRetry {
		if t.Tool == tool {
			return Retry{Attempts: t.Attempts, Backoff: t.Backoff, On: t.On}
		}
	}
	return s.Retry
}

// checkRetry reports the problems of a retry policy at p, filling what it
// leaves unset from def.
func checkRetry(ck *checker, p string, r *Retry, def Retry) {
	if r.Attempts == 0 {
		r.Attempts = def.Attempts
	}
	if r.Backoff == 0 {
		r.Backoff = def.Backoff
	}
	if r.On == nil {
		r.On = slices.Clone(def.On)
	}
	if r.Attempts < 1 || r.Attempts > 10 {
		ck.add(p+"attempts", fmt.Sprintf("%d is out of range; use 1 (no retry) to 10 tries in all, such as 3", r.Attempts))
	}
	if r.Backoff < 0 || r.Backoff > Duration(5*time.Minute) {
		ck.add(p+"backoff", fmt.Sprintf("%s is out of range; use 0s to 5m, such as 1s", r.Backoff))
	}
	for j, c := range r.On {
		if !slices.Contains(RetryClasses, c) {
			ck.add(fmt.Sprintf("%son[%d]", p, j), fmt.Sprintf("%q is not a failure class; use %s", c, strings.Join(RetryClasses, ", ")))
		}
	}
}

// UserToken says how a person's own token reaches an MCP server.
type UserToken struct {
	// Provider names the connection, as in /connect github; empty: the
	// server takes no user tokens.
	Provider string `yaml:"provider"`
	// Env is the environment variable a stdio server reads the token from.
	Env string `yaml:"env"`
	// Header is the request header an HTTP server reads it from.
	Header string `yaml:"header"`
	// Format places the token in the value: "%s" (the default) is the
	// token alone, "Bearer %s" an Authorization header's.
	Format string `yaml:"format"`
}

// Value is the token placed as Format says.
func (u UserToken) Value(token string) string { return strings.Replace(u.Format, "%s", token, 1) }

// Pairs are "NAME=value" environment variables or "Name: value" headers,
// whose values hold tokens: every way of printing, logging or encoding
// them shows each name with "[redacted]" for its value.
type Pairs []string

// redacted is each pair's name with its value hidden.
func (p Pairs) redacted() []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p))
	for i, pair := range p {
		name, sep := "", ""
		if j := strings.IndexAny(pair, "=:"); j > 0 {
			name, sep = strings.TrimSpace(pair[:j]), pair[j:j+1]
		}
		switch sep {
		case "=":
			out[i] = name + "=" + Redacted
		case ":":
			out[i] = name + ": " + Redacted
		default:
			out[i] = Redacted
		}
	}
	return out
}

// MarshalYAML encodes the redacted pairs.
func (p Pairs) MarshalYAML() (any, error) { return p.redacted(), nil }

// MarshalJSON encodes the redacted pairs.
func (p Pairs) MarshalJSON() ([]byte, error) { return json.Marshal(p.redacted()) }

// LogValue logs the redacted pairs.
func (p Pairs) LogValue() slog.Value { return slog.AnyValue(p.redacted()) }

// Format prints the redacted pairs for every verb.
func (p Pairs) Format(f fmt.State, verb rune) {
	secret.Format(f, verb, fmt.Sprint(p.redacted()))
}

// mcpServerFields is MCPServer without its methods, for encoding.
type mcpServerFields MCPServer

// MarshalYAML encodes the server with its URL as RedactURL shows it (env
// and headers encode redacted on their own).
func (s MCPServer) MarshalYAML() (any, error) {
	f := mcpServerFields(s)
	f.URL = RedactURL(f.URL)
	return f, nil
}

// MarshalJSON encodes the server as MarshalYAML does.
func (s MCPServer) MarshalJSON() ([]byte, error) {
	f := mcpServerFields(s)
	f.URL = RedactURL(f.URL)
	return json.Marshal(f)
}

// RedactURL is u with its password and every query value hidden: a URL's
// token may be in any parameter. Text that doesn't parse is hidden whole.
func RedactURL(u string) string {
	if u == "" {
		return ""
	}
	p, err := url.Parse(u)
	if err != nil {
		return Redacted
	}
	if _, ok := p.User.Password(); ok {
		p.User = url.UserPassword(p.User.Username(), "REDACTED")
	}
	if p.RawQuery != "" {
		q := p.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		p.RawQuery = q.Encode()
	}
	return strings.ReplaceAll(p.String(), "REDACTED", Redacted)
}

// DefaultMCPTimeout bounds an MCP tool call when the server sets none.
const DefaultMCPTimeout = Duration(60 * time.Second)

// The caps on what an MCP server sends when the server sets none.
const (
	DefaultMCPMaxResultKB  = 256
	DefaultMCPMaxMessageMB = 4
)

// DefaultMCPInheritEnv is what a stdio server gets of parley's environment
// when its inherit_env is not set.
var DefaultMCPInheritEnv = []string{"PATH", "HOME", "LANG"}

var mcpID = idPattern{max: 32, more: "_-"}

// runAs is a user name, or uid[:gid].
var runAs = lazyregexp.New(`^(?:[a-z_][a-z0-9_.-]{0,31}|[0-9]{1,10}(?::[0-9]{1,10})?)$`)

// mcpIDProblem says what is wrong with a server id, or "". "__" joins the
// id and a tool's name, so an id holding "__" or ending in "_" would let
// one server's tools fall under another's names and rules.
func mcpIDProblem(id string) string {
	switch {
	case !mcpID.MatchString(id):
		return fmt.Sprintf("%q is not a server id; use up to 32 lower-case letters, digits, '-' or '_' (it prefixes the server's tools: <id>__<tool>)", id)
	case strings.Contains(id, "__") || strings.HasSuffix(id, "_"):
		return fmt.Sprintf("%q is not a server id: it may not hold \"__\" or end in '_', as \"__\" separates the server from the tool in <id>__<tool>", id)
	}
	return ""
}

// checkMCP reports the servers' problems and fills in defaults.
func (c *Config) checkMCP(ck *checker) {
	seen := map[string]bool{}
	for i := range c.MCP.Servers {
		s := &c.MCP.Servers[i]
		p := fmt.Sprintf("mcp.servers[%d].", i)
		s.ID = strings.TrimSpace(s.ID)
		switch msg := mcpIDProblem(s.ID); {
		case msg != "":
			ck.add(p+"id", msg)
		case seen[s.ID]:
			ck.add(p+"id", fmt.Sprintf("two servers are called %q; give each its own id", s.ID))
		}
		seen[s.ID] = true
		s.Command, s.URL = strings.TrimSpace(s.Command), strings.TrimSpace(s.URL)
		switch {
		case s.Command == "" && s.URL == "":
			ck.add(p+"command", "give either command (a stdio server parley starts) or url (a streamable HTTP server)")
		case s.Command != "" && s.URL != "":
			ck.add(p+"url", "give command or url, not both")
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ck.add(p+"url", fmt.Sprintf("%q is not an http:// or https:// URL", s.URL))
			}
		}
		for j, e := range s.Env {
			if name, _, ok := strings.Cut(e, "="); !ok || !envName.MatchString(name) {
				ck.add(fmt.Sprintf("%senv[%d]", p, j), "write NAME=value, e.g. GITHUB_TOKEN=${GITHUB_TOKEN}")
			}
		}
		for j, h := range s.Headers {
			if name, _, ok := strings.Cut(h, ":"); !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t") {
				ck.add(fmt.Sprintf("%sheaders[%d]", p, j), "write Name: value, e.g. \"Authorization: Bearer ${API_TOKEN}\"")
			}
		}
		s.checkProcess(ck, p)
		s.checkUserToken(ck, p+"user_token.")
		switch {
		case s.MaxResultKB < 0:
			ck.add(p+"max_result_kb", "must not be negative")
		case s.MaxResultKB == 0:
			s.MaxResultKB = DefaultMCPMaxResultKB
		}
		switch {
		case s.MaxMessageMB < 0:
			ck.add(p+"max_message_mb", "must not be negative")
		case s.MaxMessageMB == 0:
			s.MaxMessageMB = DefaultMCPMaxMessageMB
		}
		if s.MaxMessageMB<<10 < s.MaxResultKB {
			ck.add(p+"max_message_mb", fmt.Sprintf("%d MiB is less than max_result_kb (%d KiB): a result that large would end the connection instead of being cut; raise max_message_mb", s.MaxMessageMB, s.MaxResultKB))
		}
		if s.Timeout < 0 {
			ck.add(p+"timeout", "must not be negative")
		}
		if s.Timeout == 0 {
			s.Timeout = DefaultMCPTimeout
		}
		checkRetry(ck, p+"retry.", &s.Retry, Retry{Attempts: DefaultRetryAttempts, Backoff: DefaultRetryBackoff, On: slices.Clone(RetryClasses)})
		tools := map[string]bool{}
		for j := range s.ToolRetry {
			t := &s.ToolRetry[j]
			tp := fmt.Sprintf("%stool_retry[%d].", p, j)
			switch t.Tool = strings.TrimSpace(t.Tool); {
			case t.Tool == "":
				ck.add(tp+"tool", "name one of the server's tools, as the server names it (without "+s.ID+"__)")
			case tools[t.Tool]:
				ck.add(tp+"tool", fmt.Sprintf("%q has two retry policies; keep one", t.Tool))
			}
			tools[t.Tool] = true
			r := Retry{Attempts: t.Attempts, Backoff: t.Backoff, On: t.On}
			checkRetry(ck, tp, &r, s.Retry)
			t.Attempts, t.Backoff, t.On = r.Attempts, r.Backoff, r.On
		}
	}
}

// checkProcess reports the problems of a stdio server's process keys.
func (s *MCPServer) checkProcess(ck *checker, p string) {
	if s.URL != "" {
		if len(s.InheritEnv) > 0 {
			ck.add(p+"inherit_env", "only a stdio server (command) has an environment; drop it for a url")
		}
		if s.RunAs != "" {
			ck.add(p+"run_as", "only a stdio server (command) runs as a user; drop it for a url")
		}
	}
	if s.InheritEnv == nil && s.URL == "" {
		s.InheritEnv = slices.Clone(DefaultMCPInheritEnv)
	}
	for j, name := range s.InheritEnv {
		if !envName.MatchString(name) {
			ck.add(fmt.Sprintf("%sinherit_env[%d]", p, j), fmt.Sprintf("%q is not an environment variable name; name one such as PATH", name))
		}
	}
	s.RunAs = strings.TrimSpace(s.RunAs)
	if s.RunAs != "" && !runAs.MatchString(s.RunAs) {
		ck.add(p+"run_as", fmt.Sprintf("%q is not a user; write a user name such as mcp, or uid[:gid] such as 1001:1001", s.RunAs))
	}
}

var headerName = lazyregexp.New(`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`)

// checkUserToken reports the problems of a server's user_token.
func (s *MCPServer) checkUserToken(ck *checker, p string) {
	u := &s.UserToken
	u.Provider, u.Env, u.Header = strings.TrimSpace(u.Provider), strings.TrimSpace(u.Env), strings.TrimSpace(u.Header)
	if u.Provider == "" {
		if u.Env != "" || u.Header != "" {
			ck.add(p+"provider", "required with env or header: name the connection people make with /connect <provider>, e.g. github")
		}
		return
	}
	if !mcpID.MatchString(u.Provider) {
		ck.add(p+"provider", fmt.Sprintf("%q is not a provider name; use up to 32 lower-case letters, digits, '-' or '_', such as github", u.Provider))
	}
	if u.Format == "" {
		u.Format = "%s"
	}
	if strings.Count(u.Format, "%s") != 1 || strings.Count(u.Format, "%") != 1 {
		ck.add(p+"format", fmt.Sprintf("%q must hold %%s once, where the token goes, and no other %%, e.g. \"Bearer %%s\"", u.Format))
	}
	switch {
	case s.Command != "" && u.Header != "":
		ck.add(p+"header", "a stdio server (command) takes the token in env, not a header")
	case s.URL != "" && u.Env != "":
		ck.add(p+"env", "an HTTP server (url) takes the token in a header, not env")
	case s.Command != "" && !envName.MatchString(u.Env):
		ck.add(p+"env", fmt.Sprintf("%q is not an environment variable name; name the one the server reads its token from, e.g. GITHUB_TOKEN", u.Env))
	case s.URL != "" && !headerName.MatchString(u.Header):
		ck.add(p+"header", fmt.Sprintf("%q is not a header name; name the one the server reads its token from, e.g. Authorization", u.Header))
	}
}

// MCPServer returns the server called id.
func (c *Config) MCPServer(id string) (MCPServer, bool) {
	for _, s := range c.MCP.Servers {
		if s.ID == id {
			return s, true
		}
	}
	return MCPServer{}, false
}
