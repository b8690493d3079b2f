// Package config loads, checks and describes parley's YAML configuration.
//
// Parse and Load decode strictly: unknown keys, duplicate keys, values of the
// wrong type and invalid settings are all reported together as Problems, each
// with its file, line and dotted key path. Values may refer to the environment
// with ${VAR} or ${VAR:-default}; $$ is a literal $.
package config

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // time zones work on machines without a zoneinfo database

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/llm"
)

// Defaults applied to keys that are absent from the file.
const (
	DefaultDatabaseURL      = "data/parley.db"
	DefaultSynchronous      = "full"
	DefaultBusyTimeout      = 5 * time.Second
	DefaultPostgresMaxConns = 10
	DefaultListen           = "127.0.0.1:8080"
	DefaultEventLogMB       = 4
	DefaultMinFreeMB        = 100
	DefaultHistoryCacheMB   = 8
	DefaultMaxTitleChars    = 200
	DefaultMaxMetadataBytes = 16 << 10
	DefaultLogLevel         = "info"
	DefaultLogFormat        = "text"
	DefaultAgentID          = "default"
	DefaultModel            = "echo"
	DefaultMaxContextTokens = 128000
	DefaultDailyResetHour   = 4
	DefaultTimezone         = "Local"
	DefaultPrompt           = "You are a helpful assistant."
	DefaultMaxSteps         = 10
	DefaultQueueMode        = "followup"
	DefaultMaxOutputTokens  = 4096
	// DefaultMaxFileTextBytes is agents[].files.max_text_bytes's default:
	// 64 KiB of file text a turn, about 16,000 tokens.
	DefaultMaxFileTextBytes = 64 << 10
	// DefaultMaxImagesPerTurn is agents[].images.max_per_turn's default.
	DefaultMaxImagesPerTurn = 10
	// DefaultMaxImageBytesPerTurn is agents[].images.max_bytes_per_turn's
	// default: 10 MiB, about 13.3 MiB once base64-encoded, well within
	// every provider's request size limit (Anthropic's is 32 MB).
	DefaultMaxImageBytesPerTurn = 10 << 20
	// MaxImagesPerTurn is the most agents[].images.max_per_turn allows.
	MaxImagesPerTurn = 100
	// MaxImageBytesPerTurn is the most agents[].images.max_bytes_per_turn
	// allows.
	MaxImageBytesPerTurn = 20 << 20
	// MaxFileTextBytes is the most agents[].files.max_text_bytes allows.
	MaxFileTextBytes       = 1 << 20
	DefaultRecovery        = "rerun"
	DefaultQueueCap        = 20
	DefaultDebounce        = 500 * time.Millisecond
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultReplicaLease and DefaultReplicaHeartbeat give failover within
	// about six seconds of a replica's last heartbeat.
	DefaultReplicaLease     = 5 * time.Second
	DefaultReplicaHeartbeat = time.Second

	DefaultCompactionThreshold = 0.70
	DefaultMemoryIndex         = "builtin"
	DefaultTypesenseCollection = "parley_memory"
	DefaultTypesenseTimeout    = 5 * time.Second
)

// Config is the whole of parley's configuration.
type Config struct {
	Database Database `yaml:"database"`
	HTTP     HTTP     `yaml:"http"`
	Log      Log      `yaml:"log"`
	// Agents always holds at least one agent after Parse or Default.
	Agents    []Agent   `yaml:"agents"`
	Providers Providers `yaml:"providers"`
	Gateway   Gateway   `yaml:"gateway"`
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
	Permissions Permissions `yaml:"permissions"`
	// Sessions says how long archived sessions are kept.
	Sessions Sessions `yaml:"sessions"`
	// Skills are the shared skills folders.
	Skills Skills `yaml:"skills"`
	// Secrets says where the secrets store's key is.
	Secrets Secrets `yaml:"secrets"`
	// Speech transcribes voice notes and speaks replies.
	Speech Speech `yaml:"speech"`
	// SessionHooks post sessions' lifecycle events to integrators.
	SessionHooks []SessionHook `yaml:"session_hooks"`
	// Harnesses are the bases sessions run on (agents[].harness,
	// bindings[].harness, POST /v1/sessions).
	Harnesses []Harness `yaml:"harnesses"`
	// Telemetry sends traces of each turn to an OTLP collector.
	Telemetry Telemetry `yaml:"telemetry"`

	// Where each key is in the file, for problems found after Parse.
	file  string
	lines map[string]int
	// resolved holds the stored secrets' values ResolveSecrets put in;
	// a pointer, so that printing the Config shows an address, not them.
	resolved *resolvedSecrets
}

type resolvedSecrets struct{ values []string }

// Memory configures long-term memory's search index.
type Memory struct {
	// Index is "builtin" (full-text search in the database) or "typesense".
	Index     string    `yaml:"index"`
	Typesense Typesense `yaml:"typesense"`
}

// Typesense is how to reach a Typesense server.
type Typesense struct {
	URL        string   `yaml:"url"`
	APIKey     Secret   `yaml:"api_key"`
	Collection string   `yaml:"collection"`
	Timeout    Duration `yaml:"timeout"`
}

// Compaction tunes when and how an agent's sessions are compacted.
type Compaction struct {
	// Threshold is the share of max_context_tokens at which a session is
	// compacted.
	Threshold float64 `yaml:"threshold"`
	// Model summarizes; empty means the agent's own model.
	Model string `yaml:"model"`
	// Notify tells the user in one line when earlier messages were
	// summarized.
	Notify bool `yaml:"notify"`
	// TailTurns is how many of the latest turns (a user message and what
	// answered it) stay as they are; the rest is summarized.
	TailTurns int `yaml:"tail_turns"`
	// TailBudgetPct caps the kept turns' share, in percent, of the usable
	// window (the context window less ReserveTokens): past it, one turn
	// fewer is kept (never fewer than one), with a warning in the log.
	TailBudgetPct int `yaml:"tail_budget_pct"`
	// SummaryMaxTokens caps the summary's length.
	SummaryMaxTokens int `yaml:"summary_max_tokens"`
	// ReserveTokens is the room kept for the reply: compaction runs once
	// the context passes the window less it. 0: min(20000,
	// max_output_tokens).
	ReserveTokens int `yaml:"reserve_tokens"`
	// Retries is how often a failed summary is tried again, with backoff.
	Retries int `yaml:"retries"`
	// FlushTimeout bounds the memory flush, every call of it; past it the
	// compaction goes on without it.
	FlushTimeout Duration `yaml:"flush_timeout"`
	// SummaryTimeout bounds the summary, retries included; past it the
	// compaction is skipped and the history stays as it was.
	SummaryTimeout Duration `yaml:"summary_timeout"`
}

// Compaction defaults.
const (
	DefaultTailTurns        = 2
	DefaultTailBudgetPct    = 30
	DefaultSummaryMaxTokens = 1024
	DefaultSummaryRetries   = 2
	DefaultFlushTimeout     = 2 * time.Minute
	DefaultSummaryTimeout   = 3 * time.Minute
)

// Timeouts bound each model call (one attempt; each retry gets them anew).
// See llm.Timeouts.
type Timeouts struct {
	// Connect bounds reaching the provider (TCP and TLS).
	Connect Duration `yaml:"connect"`
	// FirstByte bounds the wait, once connected, for the reply's first
	// byte.
	FirstByte Duration `yaml:"first_byte"`
	// Idle bounds the silence between two chunks of the stream.
	Idle Duration `yaml:"idle"`
	// Total bounds the whole call.
	Total Duration `yaml:"total"`
}

// LLM is t as the model clients take it.
func (t Timeouts) LLM() llm.Timeouts {
	return llm.Timeouts{Connect: t.Connect.Std(), FirstByte: t.FirstByte.Std(), Idle: t.Idle.Std(), Total: t.Total.Std()}
}

// Providers holds the settings of each model provider, by its name in
// model specs ("openai", "anthropic", or any other registered with
// llm.Register).
type Providers map[string]Provider

// Provider is how to reach one model provider's API.
type Provider struct {
	// APIKey is the provider's API key; empty when not configured.
	APIKey Secret `yaml:"api_key"`
	// BaseURL optionally replaces the provider's API address, e.g. for an
	// OpenAI-compatible server such as Ollama (http://localhost:11434/v1),
	// vLLM or OpenRouter. It is an http:// or https:// URL when set.
	BaseURL string `yaml:"base_url"`
	// MaxConcurrent caps the calls in flight to this provider, so a burst
	// of chats waits its turn instead of tripping the provider's rate
	// limits; 0: no cap.
	MaxConcurrent int `yaml:"max_concurrent"`
	// Timeouts bound each call to the provider; a call past one is
	// retried, then handed to the agent's fallback_models.
	Timeouts Timeouts `yaml:"timeouts"`
}

// Configured reports whether the provider has an API key or a base URL.
func (p Provider) Configured() bool { return p.APIKey != "" || p.BaseURL != "" }

// Lookup returns the settings of the provider named in a model spec, and
// whether the name is a provider parley knows (registered with
// llm.Register); an unset section is a known provider not configured.
func (p Providers) Lookup(name string) (Provider, bool) {
	if _, ok := llm.Lookup(name); !ok {
		return Provider{}, false
	}
	return p[name], true
}

// Settings are the provider's settings as its client takes them.
func (p Provider) Settings() llm.Settings {
	return llm.Settings{APIKey: p.APIKey.Reveal(), BaseURL: p.BaseURL, Timeouts: p.Timeouts.LLM()}
}

// Gateway tunes how messages are queued and answered.
type Gateway struct {
	// Recovery is what to do on start with messages accepted before a crash
	// but never answered: "rerun" answers them, "mark" marks them failed.
	Recovery string `yaml:"recovery"`
	// QueueCap is how many messages may wait per session before the sender
	// is told to wait.
	QueueCap int `yaml:"queue_cap"`
	// Debounce is the window within which a burst of messages is answered as
	// one turn; 0 turns it off.
	Debounce Duration `yaml:"debounce"`
	// ShutdownTimeout is how long running turns get to finish on SIGTERM.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// ReplicaID names this process among replicas sharing one PostgreSQL
	// database. Set, no two live processes may share it; unset, each
	// process gets the host name and a random suffix.
	ReplicaID string `yaml:"replica_id"`
	// ReplicaIDSet reports that the config named the replica.
	ReplicaIDSet bool `yaml:"-"`
	// ReplicaLease is how long a replica stays live without a heartbeat:
	// a survivor takes a dead replica's sessions and channels over within
	// it and one heartbeat. ReplicaHeartbeat is how often a replica renews.
	ReplicaLease     Duration `yaml:"replica_lease"`
	ReplicaHeartbeat Duration `yaml:"replica_heartbeat"`
	// AdvertiseURL is where the other replicas reach this one's API (a
	// request for a session another replica runs is passed to it).
	// Default: http:// and http.listen, with the host name for an
	// unspecified address.
	AdvertiseURL string `yaml:"advertise_url"`
}

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

// Database selects and tunes the message store.
type Database struct {
	// URL is a postgres:// or postgresql:// URL for PostgreSQL; anything else
	// is a SQLite file path, optionally prefixed with "file:" or "sqlite:".
	URL DSN `yaml:"url"`
	// HistoryCacheMB bounds, in MiB, the recent histories kept in memory,
	// so a turn reads one row of its session instead of its messages
	// (0 turns it off).
	HistoryCacheMB int      `yaml:"history_cache_mb"`
	SQLite         SQLite   `yaml:"sqlite"`
	Postgres       Postgres `yaml:"postgres"`
}

// SQLite tunes the SQLite engine.
type SQLite struct {
	// Synchronous is "full" or "normal". FULL fsyncs every commit, so an
	// acknowledged message survives power loss. NORMAL (in WAL mode) is
	// faster, but the last commits can be lost on power loss; never on a
	// process crash.
	Synchronous string `yaml:"synchronous"`
	// BusyTimeout is how long a writer waits for a lock before giving up.
	BusyTimeout Duration `yaml:"busy_timeout"`
	// MinFreeMB is the free space, in MiB, the database's filesystem must
	// keep for /readyz to say ready.
	MinFreeMB int `yaml:"min_free_mb"`
}

// Postgres tunes the PostgreSQL engine.
type Postgres struct {
	MaxConns int `yaml:"max_conns"`
}

// HTTP configures the API and webhook listener.
type HTTP struct {
	Listen string `yaml:"listen"`
	// Tokens are the admin bearer tokens of the /v1 API; with none, the API
	// answers every request with 401.
	Tokens []Secret `yaml:"tokens"`
	// OpsListen, when set, serves /healthz, /readyz and /metrics on this
	// address instead of Listen (which keeps the API and webhooks).
	OpsListen string `yaml:"ops_listen"`
	// CallbackSecret signs the replies POSTed to an API session's
	// webhook_url; with none, sessions can't have one.
	CallbackSecret Secret `yaml:"callback_secret"`
	// EventLogMB bounds, in MiB, the run events the API keeps in memory for
	// its streams; past it the runs that finished first are dropped (a
	// replay of one is rebuilt from the database).
	EventLogMB int `yaml:"event_log_mb"`
	// MaxTitleChars and MaxMetadataBytes cap an API session's title (in
	// characters) and its metadata (in bytes of JSON).
	MaxTitleChars    int `yaml:"max_title_chars"`
	MaxMetadataBytes int `yaml:"max_metadata_bytes"`
	// CallbackAllow lists the IP addresses, CIDR networks and host names
	// reply callbacks may reach although they are loopback, link-local,
	// private or reserved; by default callbacks reach only public
	// addresses.
	CallbackAllow []string `yaml:"callback_allow"`
	// MCP serves parley as an MCP server at /mcp, to requests with one of
	// Tokens; true unless set to false.
	MCP bool `yaml:"mcp"`
}

// Log configures the daemon's logger.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn or error
	Format string `yaml:"format"` // text or json
}

// Agent is one assistant persona with its own model and session rules.
type Agent struct {
	ID    string `yaml:"id"`
	Model string `yaml:"model"` // "echo", "openai/<model>" or "anthropic/<model>"
	// Prompt is the agent's system prompt.
	Prompt string `yaml:"prompt"`
	// Workspace is an optional directory; its AGENTS.md is added to the
	// prompt.
	Workspace string `yaml:"workspace"`
	// Tools names the tools the agent may call; nil means none.
	Tools []string `yaml:"tools"`
	// MaxSteps caps the model calls (each possibly calling tools) in one
	// turn.
	MaxSteps int `yaml:"max_steps"`
	// QueueMode is what happens to messages that arrive while a turn runs:
	// "followup", "collect", "steer" or "interrupt".
	QueueMode string `yaml:"queue_mode"`
	// MaxOutputTokens caps the length of each model reply.
	MaxOutputTokens int `yaml:"max_output_tokens"`

	// Vision says the agent's model accepts images: photos sent to it are
	// shown to the model. Without it, the user is told the model can't see
	// them.
	Vision             bool       `yaml:"vision"`
	MaxContextTokens   int        `yaml:"max_context_tokens"`
	Compaction         Compaction `yaml:"compaction"`
	IdleTimeoutMinutes int        `yaml:"idle_timeout_minutes"`
	DailyResetHour     *int       `yaml:"daily_reset_hour"` // nil means the default; -1 turns it off
	Timezone           string     `yaml:"timezone"`
	History            History    `yaml:"history"`
	// Files is what the agent reads of the files sent to it.
	Files AgentFiles `yaml:"files"`
	// Images bound the images a vision model is shown in one prompt.
	Images AgentImages `yaml:"images"`
	// VoiceReplies is when replies are spoken (speech section): "off",
	// "on", or "when_spoken" (a voice note is answered with one); a
	// chat's /voice on|off overrides it.
	VoiceReplies string `yaml:"voice_replies"`
	// FallbackModels answer, in order, when the model fails in a way
	// another may not (a 5xx, an overload, a timeout).
	FallbackModels []string `yaml:"fallback_models"`
	// Models are the models a chat may switch the agent to with /model
	// (and the API with a session's model); none means only its own.
	Models []string `yaml:"models"`
	// ReasoningEffort asks reasoning models to think more or less: low,
	// medium or high ("": the provider's default).
	ReasoningEffort string `yaml:"reasoning_effort"`
	// Timeouts override, key by key, the provider's for this agent's
	// model calls; 0s keeps the provider's.
	Timeouts Timeouts `yaml:"timeouts"`
	// Permissions are the agent's own tool permission rules.
	Permissions []PermissionRule `yaml:"permissions"`
	// Subagents lists the other agents this one may hand tasks to with
	// sessions_spawn; empty (the default) allows only itself.
	Subagents []string `yaml:"subagents"`
	// Harness, if set, is the harness the agent's sessions run on (a
	// binding's harness comes first).
	Harness string `yaml:"harness"`

	loc *time.Location // cached by validation so Location never fails
}

// AgentFiles is what an agent reads of the files (documents) sent to it.
type AgentFiles struct {
	// MaxTextBytes caps the text that the files of one turn add to the
	// prompt (plain text, Markdown, CSV, JSON, a PDF's text); a longer
	// file is cut there, and the model is told. 0 adds no file's text:
	// each file is only named.
	MaxTextBytes int `yaml:"max_text_bytes"`
}

// AgentImages bound the images one prompt shows a vision model: the
// turn's own photos first, then those kept with earlier messages, newest
// first, until either bound is reached.
type AgentImages struct {
	// MaxPerTurn is the most images one prompt carries.
	MaxPerTurn int `yaml:"max_per_turn"`
	// MaxBytesPerTurn is the most bytes of images (as sent, after
	// scaling down) one prompt carries: the turn's own photos always go
	// (up to MaxPerTurn), and earlier ones join while they fit; 0 sends
	// only the turn's own.
	MaxBytesPerTurn int `yaml:"max_bytes_per_turn"`
}

// History is how many turns of history go into the prompt, per session kind.
type History struct {
	Channels int `yaml:"channels"`
	Cron     int `yaml:"cron"`
	Webhook  int `yaml:"webhook"`
	CLI      int `yaml:"cli"`
	API      int `yaml:"api"`
	MCP      int `yaml:"mcp"`
	// OmitToolResults names tools whose results earlier turns got are left
	// out of the prompt (a line says so in their place).
	OmitToolResults []string `yaml:"omit_tool_results"`
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

// Engine returns "postgres" for a postgres:// or postgresql:// URL and
// "sqlite" otherwise (validation rejects URLs that are neither).
func (d Database) Engine() string {
	if t, err := dbutil.ParseURL(string(d.URL)); err == nil && t.Dialect == dbutil.Postgres {
		return "postgres"
	}
	return "sqlite"
}

// SQLitePath returns the SQLite file path: the URL without a "file:" or
// "sqlite:" prefix and query. It is "" for PostgreSQL or an invalid URL.
func (d Database) SQLitePath() string {
	t, err := dbutil.ParseURL(string(d.URL))
	if err != nil {
		return ""
	}
	return t.Path
}

// AllowedModels are the models a session of the agent may run on: its own
// model first, then its models allowlist.
func (a Agent) AllowedModels() []string {
	out := []string{a.Model}
	for _, m := range a.Models {
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Location returns the agent's time zone. After Parse or Default it is the
// zone loaded during validation; on an Agent built by hand it falls back to
// time.Local when Timezone is empty or "Local", and to UTC when it can't load.
func (a Agent) Location() *time.Location {
	if a.loc != nil {
		return a.loc
	}
	if a.Timezone == "" || a.Timezone == "Local" {
		return time.Local
	}
	loc, err := time.LoadLocation(a.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// IdleTimeout is how long a session may be idle before it is reset; 0 means
// never.
func (a Agent) IdleTimeout() time.Duration {
	return time.Duration(a.IdleTimeoutMinutes) * time.Minute
}

// DailyReset returns the local hour at which sessions reset each day, and
// false when the daily reset is turned off.
func (a Agent) DailyReset() (hour int, on bool) {
	if a.DailyResetHour == nil {
		return DefaultDailyResetHour, true
	}
	if *a.DailyResetHour < 0 {
		return 0, false
	}
	return *a.DailyResetHour, true
}

// applyDefaults fills in absent settings. set reports whether a dotted key had
// a value in the file; with a nil set, zero numbers count as absent, so an
// explicit 0 in a file is validated rather than silently replaced.
func (c *Config) applyDefaults(set map[string]bool) {
	isSet := func(key string) bool { return set[key] }
	intDefault := func(v *int, key string, def int) {
		if *v == 0 && !isSet(key) {
			*v = def
		}
	}

	if strings.TrimSpace(string(c.Database.URL)) == "" {
		c.Database.URL = DefaultDatabaseURL
	}
	c.Database.SQLite.Synchronous = normalize(c.Database.SQLite.Synchronous, DefaultSynchronous)
	if c.Database.SQLite.BusyTimeout == 0 && !isSet("database.sqlite.busy_timeout") {
		c.Database.SQLite.BusyTimeout = Duration(DefaultBusyTimeout)
	}
	intDefault(&c.Database.Postgres.MaxConns, "database.postgres.max_conns", DefaultPostgresMaxConns)
	intDefault(&c.Database.SQLite.MinFreeMB, "database.sqlite.min_free_mb", DefaultMinFreeMB)
	intDefault(&c.Database.HistoryCacheMB, "database.history_cache_mb", DefaultHistoryCacheMB)
	if strings.TrimSpace(c.HTTP.Listen) == "" {
		c.HTTP.Listen = DefaultListen
	}
	intDefault(&c.HTTP.EventLogMB, "http.event_log_mb", DefaultEventLogMB)
	intDefault(&c.HTTP.MaxTitleChars, "http.max_title_chars", DefaultMaxTitleChars)
	intDefault(&c.HTTP.MaxMetadataBytes, "http.max_metadata_bytes", DefaultMaxMetadataBytes)
	c.Log.Level = normalize(c.Log.Level, DefaultLogLevel)
	c.Log.Format = normalize(c.Log.Format, DefaultLogFormat)

	durationDefault := func(d *Duration, key string, def time.Duration) {
		if *d == 0 && !isSet(key) {
			*d = Duration(def)
		}
	}
	for name, p := range c.Providers {
		p.APIKey = Secret(strings.TrimSpace(string(p.APIKey)))
		p.BaseURL = strings.TrimSpace(p.BaseURL)
		if bare := (Provider{APIKey: p.APIKey, BaseURL: p.BaseURL, MaxConcurrent: p.MaxConcurrent}); bare == (Provider{}) {
			// A section left empty (an unset ${VAR}), or with only its
			// timeouts, is no section: nothing calls the provider.
			delete(c.Providers, name)
			continue
		}
		k, d := "providers."+name+".timeouts.", llm.DefaultTimeouts
		durationDefault(&p.Timeouts.Connect, k+"connect", d.Connect)
		durationDefault(&p.Timeouts.FirstByte, k+"first_byte", d.FirstByte)
		durationDefault(&p.Timeouts.Idle, k+"idle", d.Idle)
		durationDefault(&p.Timeouts.Total, k+"total", d.Total)
		c.Providers[name] = p
	}
	if len(c.Providers) == 0 {
		c.Providers = nil
	}
	if len(c.HTTP.Tokens) == 0 {
		c.HTTP.Tokens = nil // "tokens: []" is the same as leaving it out
	}
	if len(c.HTTP.CallbackAllow) == 0 {
		c.HTTP.CallbackAllow = nil
	}
	if !isSet("http.mcp") {
		c.HTTP.MCP = true
	}
	c.Gateway.Recovery = normalize(c.Gateway.Recovery, DefaultRecovery)
	intDefault(&c.Gateway.QueueCap, "gateway.queue_cap", DefaultQueueCap)
	durationDefault(&c.Gateway.Debounce, "gateway.debounce", DefaultDebounce)
	durationDefault(&c.Gateway.ShutdownTimeout, "gateway.shutdown_timeout", DefaultShutdownTimeout)
	durationDefault(&c.Gateway.ReplicaLease, "gateway.replica_lease", DefaultReplicaLease)
	durationDefault(&c.Gateway.ReplicaHeartbeat, "gateway.replica_heartbeat", DefaultReplicaHeartbeat)
	c.Gateway.ReplicaID = strings.TrimSpace(c.Gateway.ReplicaID)
	c.Gateway.ReplicaIDSet = c.Gateway.ReplicaID != ""
	if c.Gateway.ReplicaID == "" {
		c.Gateway.ReplicaID, _ = os.Hostname()
	}
	c.Gateway.AdvertiseURL = strings.TrimRight(strings.TrimSpace(c.Gateway.AdvertiseURL), "/")
	for i := range c.Bindings {
		b := &c.Bindings[i]
		b.Agent = strings.TrimSpace(b.Agent)
		b.Adapter = strings.TrimSpace(b.Adapter)
		b.Chat = strings.TrimSpace(b.Chat)
		b.User = strings.TrimSpace(b.User)
		b.Workspace = strings.TrimSpace(b.Workspace)
	}

	c.Memory.Index = normalize(c.Memory.Index, DefaultMemoryIndex)
	c.Memory.Typesense.URL = strings.TrimSpace(c.Memory.Typesense.URL)
	c.Secrets.KeyFile = strings.TrimSpace(c.Secrets.KeyFile)
	c.Memory.Typesense.APIKey = Secret(strings.TrimSpace(string(c.Memory.Typesense.APIKey)))
	if strings.TrimSpace(c.Memory.Typesense.Collection) == "" {
		c.Memory.Typesense.Collection = DefaultTypesenseCollection
	}
	durationDefault(&c.Memory.Typesense.Timeout, "memory.typesense.timeout", DefaultTypesenseTimeout)

	if len(c.Agents) == 0 {
		c.Agents = []Agent{{ID: DefaultAgentID}}
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		p := fmt.Sprintf("agents[%d].", i)
		a.ID = strings.TrimSpace(a.ID)
		a.Model = strings.TrimSpace(a.Model)
		if a.Model == "" {
			a.Model = DefaultModel
		}
		if strings.TrimSpace(a.Prompt) == "" {
			a.Prompt = DefaultPrompt
		}
		a.Workspace = strings.TrimSpace(a.Workspace)
		for j := range a.Tools {
			a.Tools[j] = strings.TrimSpace(a.Tools[j])
		}
		if len(a.Tools) == 0 {
			a.Tools = nil // "tools: []" is the same as leaving it out
		}
		for j := range a.FallbackModels {
			a.FallbackModels[j] = strings.TrimSpace(a.FallbackModels[j])
		}
		if len(a.FallbackModels) == 0 {
			a.FallbackModels = nil
		}
		if len(a.History.OmitToolResults) == 0 {
			a.History.OmitToolResults = nil
		}
		for j := range a.Models {
			a.Models[j] = strings.TrimSpace(a.Models[j])
		}
		if len(a.Models) == 0 {
			a.Models = nil
		}
		for j := range a.Subagents {
			a.Subagents[j] = strings.TrimSpace(a.Subagents[j])
		}
		if len(a.Subagents) == 0 {
			a.Subagents = nil
		}
		a.ReasoningEffort = strings.ToLower(strings.TrimSpace(a.ReasoningEffort))
		intDefault(&a.MaxSteps, p+"max_steps", DefaultMaxSteps)
		a.QueueMode = normalize(a.QueueMode, DefaultQueueMode)
		a.VoiceReplies = normalize(a.VoiceReplies, "off")
		intDefault(&a.MaxOutputTokens, p+"max_output_tokens", DefaultMaxOutputTokens)
		intDefault(&a.MaxContextTokens, p+"max_context_tokens", DefaultMaxContextTokens)
		intDefault(&a.Files.MaxTextBytes, p+"files.max_text_bytes", DefaultMaxFileTextBytes)
		intDefault(&a.Images.MaxPerTurn, p+"images.max_per_turn", DefaultMaxImagesPerTurn)
		intDefault(&a.Images.MaxBytesPerTurn, p+"images.max_bytes_per_turn", DefaultMaxImageBytesPerTurn)
		if a.Compaction.Threshold == 0 && !isSet(p+"compaction.threshold") {
			a.Compaction.Threshold = DefaultCompactionThreshold
		}
		a.Compaction.Model = strings.TrimSpace(a.Compaction.Model)
		intDefault(&a.Compaction.TailTurns, p+"compaction.tail_turns", DefaultTailTurns)
		intDefault(&a.Compaction.TailBudgetPct, p+"compaction.tail_budget_pct", DefaultTailBudgetPct)
		intDefault(&a.Compaction.SummaryMaxTokens, p+"compaction.summary_max_tokens", DefaultSummaryMaxTokens)
		intDefault(&a.Compaction.Retries, p+"compaction.retries", DefaultSummaryRetries)
		durationDefault(&a.Compaction.FlushTimeout, p+"compaction.flush_timeout", DefaultFlushTimeout)
		durationDefault(&a.Compaction.SummaryTimeout, p+"compaction.summary_timeout", DefaultSummaryTimeout)
		if a.DailyResetHour == nil {
			h := DefaultDailyResetHour
			a.DailyResetHour = &h
		}
		a.Timezone = strings.TrimSpace(a.Timezone)
		if a.Timezone == "" {
			a.Timezone = DefaultTimezone
		}
		intDefault(&a.History.Channels, p+"history.channels", 30)
		intDefault(&a.History.Cron, p+"history.cron", 10)
		intDefault(&a.History.Webhook, p+"history.webhook", 10)
		intDefault(&a.History.CLI, p+"history.cli", 50)
		intDefault(&a.History.API, p+"history.api", 50)
		intDefault(&a.History.MCP, p+"history.mcp", 50)
	}
}

// normalize lowercases an enumerated setting and fills in its default.
func normalize(v, def string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" {
		return def
	}
	return v
}

// Duration is a time.Duration written in YAML as a string such as "5s" or
// "1m30s".
type Duration time.Duration

const durationHint = `a duration such as "5s" or "1m30s"`

// UnmarshalYAML decodes a Go duration string. A bad value is reported as a
// *yaml.TypeError so decoding carries on and every problem is reported.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: expected %s", n.Line, durationHint)}}
	}
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: expected %s, got %q", n.Line, durationHint, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML encodes the duration as a string such as "1m30s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON encodes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// String formats the duration like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }
