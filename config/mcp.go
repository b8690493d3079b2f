package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
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

// fill fills what the policy leaves unset from def.
func (r *Retry) fill(def Retry) {
	if r.Attempts == 0 {
		r.Attempts = def.Attempts
	}
	if r.Backoff == 0 {
		r.Backoff = def.Backoff
	}
	if r.On == nil {
		r.On = slices.Clone(def.On)
	}
}

// check reports the policy's problems.
func (r Retry) check(rep section.Reporter) {
	if r.Attempts < 1 || r.Attempts > 10 {
		rep.Add("attempts", fmt.Sprintf("%d is out of range; use 1 (no retry) to 10 tries in all, such as 3", r.Attempts))
	}
	if r.Backoff < 0 || r.Backoff > Duration(5*time.Minute) {
		rep.Add("backoff", fmt.Sprintf("%s is out of range; use 0s to 5m, such as 1s", r.Backoff))
	}
	for j, c := range r.On {
		if !slices.Contains(RetryClasses, c) {
			rep.Add(fmt.Sprintf("on[%d]", j), fmt.Sprintf("%q is not a failure class; use %s", c, strings.Join(RetryClasses, ", ")))
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

// SetDefaults fills in the server's absent settings: its limits, its
// retry policy, and each tool's policy from the server's.
func (s *MCPServer) SetDefaults(section.Set) {
	s.ID = strings.TrimSpace(s.ID)
	s.Command, s.URL = strings.TrimSpace(s.Command), strings.TrimSpace(s.URL)
	if s.InheritEnv == nil && s.URL == "" {
		s.InheritEnv = slices.Clone(DefaultMCPInheritEnv)
	}
	s.RunAs = strings.TrimSpace(s.RunAs)
	u := &s.UserToken
	u.Provider, u.Env, u.Header = strings.TrimSpace(u.Provider), strings.TrimSpace(u.Env), strings.TrimSpace(u.Header)
	if u.Provider != "" && u.Format == "" {
		u.Format = "%s"
	}
	if s.MaxResultKB == 0 {
		s.MaxResultKB = DefaultMCPMaxResultKB
	}
	if s.MaxMessageMB == 0 {
		s.MaxMessageMB = DefaultMCPMaxMessageMB
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultMCPTimeout
	}
	s.Retry.fill(Retry{Attempts: DefaultRetryAttempts, Backoff: DefaultRetryBackoff, On: slices.Clone(RetryClasses)})
	for j := range s.ToolRetry {
		t := &s.ToolRetry[j]
		t.Tool = strings.TrimSpace(t.Tool)
		r := Retry{Attempts: t.Attempts, Backoff: t.Backoff, On: t.On}
		r.fill(s.Retry)
		t.Attempts, t.Backoff, t.On = r.Attempts, r.Backoff, r.On
	}
}

// Check reports the server's problems but its id's uniqueness, which is
// the root's to check.
func (s MCPServer) Check(r section.Reporter) {
	if msg := mcpIDProblem(s.ID); msg != "" {
		r.Add("id", msg)
	}
	switch {
	case s.Command == "" && s.URL == "":
		r.Add("command", "give either command (a stdio server parley starts) or url (a streamable HTTP server)")
	case s.Command != "" && s.URL != "":
		r.Add("url", "give command or url, not both")
	case s.URL != "":
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			r.Add("url", fmt.Sprintf("%q is not an http:// or https:// URL", s.URL))
		}
	}
	for j, e := range s.Env {
		if name, _, ok := strings.Cut(e, "="); !ok || !envName.MatchString(name) {
			r.Add(fmt.Sprintf("env[%d]", j), "write NAME=value, e.g. GITHUB_TOKEN=${GITHUB_TOKEN}")
		}
	}
	for j, h := range s.Headers {
		if name, _, ok := strings.Cut(h, ":"); !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t") {
			r.Add(fmt.Sprintf("headers[%d]", j), "write Name: value, e.g. \"Authorization: Bearer ${API_TOKEN}\"")
		}
	}
	s.checkProcess(r)
	s.checkUserToken(section.Prefixed(r, "user_token"))
	if s.MaxResultKB < 0 {
		r.Add("max_result_kb", "must not be negative")
	}
	if s.MaxMessageMB < 0 {
		r.Add("max_message_mb", "must not be negative")
	}
	if s.MaxMessageMB<<10 < s.MaxResultKB {
		r.Add("max_message_mb", fmt.Sprintf("%d MiB is less than max_result_kb (%d KiB): a result that large would end the connection instead of being cut; raise max_message_mb", s.MaxMessageMB, s.MaxResultKB))
	}
	if s.Timeout < 0 {
		r.Add("timeout", "must not be negative")
	}
	s.Retry.check(section.Prefixed(r, "retry"))
	tools := map[string]bool{}
	for j, t := range s.ToolRetry {
		tp := fmt.Sprintf("tool_retry[%d]", j)
		switch {
		case t.Tool == "":
			r.Add(tp+".tool", "name one of the server's tools, as the server names it (without "+s.ID+"__)")
		case tools[t.Tool]:
			r.Add(tp+".tool", fmt.Sprintf("%q has two retry policies; keep one", t.Tool))
		}
		tools[t.Tool] = true
		Retry{Attempts: t.Attempts, Backoff: t.Backoff, On: t.On}.check(section.Prefixed(r, tp))
	}
}

// checkMCPIDs reports two servers of one id.
func (c *Config) checkMCPIDs(ck *checker) {
	seen := map[string]bool{}
	for i, s := range c.MCP.Servers {
		if mcpIDProblem(s.ID) == "" && seen[s.ID] {
			ck.add(fmt.Sprintf("mcp.servers[%d].id", i), fmt.Sprintf("two servers are called %q; give each its own id", s.ID))
		}
		seen[s.ID] = true
	}
}

// checkProcess reports the problems of a stdio server's process keys.
func (s MCPServer) checkProcess(r section.Reporter) {
	if s.URL != "" {
		if len(s.InheritEnv) > 0 {
			r.Add("inherit_env", "only a stdio server (command) has an environment; drop it for a url")
		}
		if s.RunAs != "" {
			r.Add("run_as", "only a stdio server (command) runs as a user; drop it for a url")
		}
	}
	for j, name := range s.InheritEnv {
		if !envName.MatchString(name) {
			r.Add(fmt.Sprintf("inherit_env[%d]", j), fmt.Sprintf("%q is not an environment variable name; name one such as PATH", name))
		}
	}
	if s.RunAs != "" && !runAs.MatchString(s.RunAs) {
		r.Add("run_as", fmt.Sprintf("%q is not a user; write a user name such as mcp, or uid[:gid] such as 1001:1001", s.RunAs))
	}
}

var headerName = lazyregexp.New(`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`)

// checkUserToken reports the problems of a server's user_token.
func (s MCPServer) checkUserToken(r section.Reporter) {
	u := s.UserToken
	if u.Provider == "" {
		if u.Env != "" || u.Header != "" {
			r.Add("provider", "required with env or header: name the connection people make with /connect <provider>, e.g. github")
		}
		return
	}
	if !mcpID.MatchString(u.Provider) {
		r.Add("provider", fmt.Sprintf("%q is not a provider name; use up to 32 lower-case letters, digits, '-' or '_', such as github", u.Provider))
	}
	if strings.Count(u.Format, "%s") != 1 || strings.Count(u.Format, "%") != 1 {
		r.Add("format", fmt.Sprintf("%q must hold %%s once, where the token goes, and no other %%, e.g. \"Bearer %%s\"", u.Format))
	}
	switch {
	case s.Command != "" && u.Header != "":
		r.Add("header", "a stdio server (command) takes the token in env, not a header")
	case s.URL != "" && u.Env != "":
		r.Add("env", "an HTTP server (url) takes the token in a header, not env")
	case s.Command != "" && !envName.MatchString(u.Env):
		r.Add("env", fmt.Sprintf("%q is not an environment variable name; name the one the server reads its token from, e.g. GITHUB_TOKEN", u.Env))
	case s.URL != "" && !headerName.MatchString(u.Header):
		r.Add("header", fmt.Sprintf("%q is not a header name; name the one the server reads its token from, e.g. Authorization", u.Header))
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
