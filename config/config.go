// Package config loads, checks and describes parley's YAML configuration.
//
// The root Config holds the sections; each section's type declares its
// own defaults and checks (section.Defaulter, section.Checker), and this
// package calls them on every section it reaches in the decoded tree. A
// section whose package this one may import lives with the code that
// uses it (dbutil.Config, llm.ProvidersConfig, permissions.Config,
// speech.Config, telemetry.Config); the others are here, each in its own
// file. The root keeps what crosses sections: the agents, harnesses,
// adapters and servers one section names in another, and unique ids.
//
// Parse and Load decode strictly: unknown keys, duplicate keys, values of the
// wrong type and invalid settings are all reported together as Problems, each
// with its file, line and dotted key path. Values may refer to the environment
// with ${VAR} or ${VAR:-default}; $$ is a literal $.
package config

import (
	"reflect"
	"strings"
	_ "time/tzdata" // time zones work on machines without a zoneinfo database

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/speech"
	"github.com/parleyd/parley/telemetry"
)

// Duration is a time.Duration written in YAML as a string such as "5s";
// see section.Duration. Every section's durations are this one type, so
// the decoding's checks and the reload's walk know it.
type Duration = section.Duration

// Config is the whole of parley's configuration.
type Config struct {
	Database dbutil.Config `yaml:"database"`
	HTTP     HTTP          `yaml:"http"`
	Log      Log           `yaml:"log"`
	// Agents always holds at least one agent after Parse or Default.
	Agents    []Agent             `yaml:"agents"`
	Providers llm.ProvidersConfig `yaml:"providers"`
	Gateway   Gateway             `yaml:"gateway"`
	// Bindings route incoming messages to agents; see Route.
	Bindings []Binding `yaml:"bindings"`
	Memory   Memory    `yaml:"memory"`
	// Adapters are the channels: each entry is one instance of a type.
	Adapters []Adapter `yaml:"adapters"`
	// Hooks are the incoming webhooks.
	Hooks []Hook `yaml:"hooks"`
	// MCP is the Model Context Protocol servers agents may use tools of.
	MCP MCP `yaml:"mcp"`
	// Budgets are the daily spend caps.
	Budgets Budgets `yaml:"budgets"`
	Cron    Cron    `yaml:"cron"`
	// Permissions hold the ask timeout and project rules of tool
	// permissions (agents have their own rules).
	Permissions permissions.Config `yaml:"permissions"`
	// Sessions says how long archived sessions are kept.
	Sessions Sessions `yaml:"sessions"`
	// Skills are the shared skills folders.
	Skills Skills `yaml:"skills"`
	// Secrets says where the secrets store's key is.
	Secrets Secrets `yaml:"secrets"`
	// Speech transcribes voice notes and speaks replies.
	Speech speech.Config `yaml:"speech"`
	// SessionHooks post sessions' lifecycle events to integrators.
	SessionHooks []SessionHook `yaml:"session_hooks"`
	// Harnesses are the bases sessions run on (agents[].harness,
	// bindings[].harness, POST /v1/sessions).
	Harnesses []Harness `yaml:"harnesses"`
	// Telemetry sends traces of each turn to an OTLP collector.
	Telemetry telemetry.Config `yaml:"telemetry"`

	// Where each key is in the file, for problems found after Parse.
	file  string
	lines map[string]int
	// resolved holds the stored secrets' values ResolveSecrets put in;
	// a pointer, so that printing the Config shows an address, not them.
	resolved *resolvedSecrets
}

type resolvedSecrets struct{ values []string }

// Binding routes messages to an agent. Empty fields match anything; see
// Config.Route for which binding wins.
type Binding struct {
	Agent   string `yaml:"agent"`   // an agent id; required
	Adapter string `yaml:"adapter"` // adapter instance id such as "tg-main"
	Chat    string `yaml:"chat"`    // chat or channel id
	User    string `yaml:"user"`    // user id
	// Workspace, if set, is the workspace of the sessions this binding
	// routes: part of their key, and the scope of their memory.
	Workspace string `yaml:"workspace"`
	// Harness, if set, is the harness of the sessions this binding
	// routes, over their agent's.
	Harness string `yaml:"harness"`
}

// SetDefaults trims the binding's keys.
func (b *Binding) SetDefaults(section.Set) {
	b.Agent = strings.TrimSpace(b.Agent)
	b.Adapter = strings.TrimSpace(b.Adapter)
	b.Chat = strings.TrimSpace(b.Chat)
	b.User = strings.TrimSpace(b.User)
	b.Workspace = strings.TrimSpace(b.Workspace)
}

// matches reports whether the binding applies to a message, and how specific
// it is: a user match beats a chat match beats an adapter match.
func (b Binding) matches(adapter, chat, user string) (score int, ok bool) {
	for _, f := range []struct {
		want, got string
		weight    int
	}{
		{b.User, user, 4},
		{b.Chat, chat, 2},
		{b.Adapter, adapter, 1},
	} {
		if f.want == "" {
			continue
		}
		if f.want != f.got {
			return 0, false
		}
		score += f.weight
	}
	return score, true
}

// Route returns the id of the agent that answers a message from user in chat
// on the adapter instance adapter. The most specific matching binding wins: one
// that names the user beats one that names the chat, which beats one that
// names only the adapter (among bindings naming the same user or chat, one
// that also names the chat or adapter is more specific). Ties go to the
// binding listed first. With no match it is the first agent; "" when there
// are no agents at all.
func (c *Config) Route(adapter, chat, user string) string {
	agent, _ := c.RouteTo(adapter, chat, user)
	return agent
}

// RouteTo is Route that also gives the workspace of the message's session:
// the matching binding's, else the adapter's own (adapters[].workspace),
// else none.
func (c *Config) RouteTo(adapter, chat, user string) (agent, workspace string) {
	best, matched := c.binding(adapter, chat, user)
	workspace = best.Workspace
	if workspace == "" {
		for _, a := range c.Adapters {
			if a.ID == adapter {
				workspace = a.Workspace
			}
		}
	}
	switch {
	case matched:
		return best.Agent, workspace
	case len(c.Agents) > 0:
		return c.Agents[0].ID, workspace
	}
	return "", workspace
}

// BindingHarness is the harness of the binding that routes a message from
// user in chat on adapter; "" when that binding sets none, or none routes
// it.
func (c *Config) BindingHarness(adapter, chat, user string) string {
	best, _ := c.binding(adapter, chat, user)
	return best.Harness
}

// binding is the binding that routes a message from user in chat on
// adapter: the most specific that matches, the first of equals.
func (c *Config) binding(adapter, chat, user string) (Binding, bool) {
	best, bestScore := Binding{}, -1
	for _, b := range c.Bindings {
		if score, ok := b.matches(adapter, chat, user); ok && score > bestScore {
			best, bestScore = b, score
		}
	}
	return best, bestScore >= 0
}

// MissingKeys returns, in order, the ids of agents whose model is served by a
// provider with neither an api_key nor a base_url. That is not an error in
// the config: the daemon starts, warns about these agents, and tells their
// chats the assistant isn't configured.
func (c *Config) MissingKeys() []string {
	var ids []string
	for _, a := range c.Agents {
		provider, _, ok := strings.Cut(a.Model, "/")
		if !ok {
			continue
		}
		if p, known := c.Providers.Lookup(provider); known && !p.Configured() {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// Default returns the configuration used when there is no file.
func Default() *Config {
	c := &Config{}
	c.applyDefaults(nil)
	// The defaults always validate (a test proves it); this caches the
	// agents' locations.
	c.validate(newChecker(""))
	return c
}

// AgentIDs are the agents' ids, in the config's order.
func (c *Config) AgentIDs() []string {
	ids := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		ids[i] = a.ID
	}
	return ids
}

// Agent returns the agent with the given id.
func (c *Config) Agent(id string) (Agent, bool) {
	for _, a := range c.Agents {
		if a.ID == id {
			return a, true
		}
	}
	return Agent{}, false
}

// applyDefaults fills in absent settings: each section's own
// (walkDefaults), then the defaults that refer from one section to
// another. set reports whether a dotted key had a value in the file; with
// a nil set, zero numbers count as absent, so an explicit 0 in a file is
// validated rather than silently replaced.
func (c *Config) applyDefaults(set map[string]bool) {
	if len(c.Agents) == 0 {
		c.Agents = []Agent{{ID: DefaultAgentID}}
	}
	walkDefaults(reflect.ValueOf(c).Elem(), "", func(key string) bool { return set[key] })
	// A hook or job that names no agent is answered by the first.
	for i := range c.Hooks {
		if c.Hooks[i].Agent == "" {
			c.Hooks[i].Agent = c.Agents[0].ID
		}
	}
	for i := range c.Cron.Jobs {
		if c.Cron.Jobs[i].Agent == "" {
			c.Cron.Jobs[i].Agent = c.Agents[0].ID
		}
	}
}
