package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
)

// Defaults of an agent's settings.
const (
	DefaultAgentID          = "default"
	DefaultModel            = "echo"
	DefaultPrompt           = "You are a helpful assistant."
	DefaultMaxSteps         = 10
	DefaultQueueMode        = "followup"
	DefaultVoiceReplies     = "off"
	DefaultMaxOutputTokens  = 4096
	DefaultMaxContextTokens = 128000
	DefaultDailyResetHour   = 4
	DefaultTimezone         = "Local"
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
	MaxFileTextBytes = 1 << 20
)

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

// Compaction defaults: the config fills them in, and the compaction code
// (agent, memory) falls back on them for a setting left zero.
const (
	// DefaultCompactionThreshold is the share of the context window at
	// which a session is compacted.
	DefaultCompactionThreshold = 0.70
	// DefaultTailTurns is how many of the latest turns stay verbatim.
	DefaultTailTurns = 2
	// DefaultTailBudgetPct caps the kept turns' share of the usable window.
	DefaultTailBudgetPct    = 30
	DefaultSummaryMaxTokens = 1024
	DefaultSummaryRetries   = 2
	// DefaultFlushTimeout and DefaultSummaryTimeout bound the memory flush
	// and the summary: shorter than a model call's total deadline, so a
	// stalled one never holds the session long.
	DefaultFlushTimeout   = 2 * time.Minute
	DefaultSummaryTimeout = 3 * time.Minute
)

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
	Timeouts llm.TimeoutsConfig `yaml:"timeouts"`
	// Permissions are the agent's own tool permission rules.
	Permissions []permissions.ConfigRule `yaml:"permissions"`
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

// SetDefaults fills in the agent's absent settings; its compaction,
// history, files and images are sections of their own.
func (a *Agent) SetDefaults(set section.Set) {
	a.ID = strings.TrimSpace(a.ID)
	a.Model = strings.TrimSpace(a.Model)
	if a.Model == "" {
		a.Model = DefaultModel
	}
	if strings.TrimSpace(a.Prompt) == "" {
		a.Prompt = DefaultPrompt
	}
	a.Workspace = strings.TrimSpace(a.Workspace)
	// "tools: []" and the like are the same as leaving the list out.
	a.Tools = trimList(a.Tools)
	a.FallbackModels = trimList(a.FallbackModels)
	a.Models = trimList(a.Models)
	a.Subagents = trimList(a.Subagents)
	a.ReasoningEffort = strings.ToLower(strings.TrimSpace(a.ReasoningEffort))
	section.Default(&a.MaxSteps, set, "max_steps", DefaultMaxSteps)
	a.QueueMode = section.Normalize(a.QueueMode, DefaultQueueMode)
	a.VoiceReplies = section.Normalize(a.VoiceReplies, DefaultVoiceReplies)
	section.Default(&a.MaxOutputTokens, set, "max_output_tokens", DefaultMaxOutputTokens)
	section.Default(&a.MaxContextTokens, set, "max_context_tokens", DefaultMaxContextTokens)
	if a.DailyResetHour == nil {
		h := DefaultDailyResetHour
		a.DailyResetHour = &h
	}
	a.Timezone = strings.TrimSpace(a.Timezone)
	if a.Timezone == "" {
		a.Timezone = DefaultTimezone
	}
}

// trimList trims each entry of a list, and gives nil for an empty one.
func trimList(l []string) []string {
	for i := range l {
		l[i] = strings.TrimSpace(l[i])
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

// SetDefaults fills in the agent's absent files settings.
func (f *AgentFiles) SetDefaults(set section.Set) {
	section.Default(&f.MaxTextBytes, set, "max_text_bytes", DefaultMaxFileTextBytes)
}

// Check reports the agent's files settings' problems.
func (f AgentFiles) Check(r section.Reporter) {
	if f.MaxTextBytes < 0 || f.MaxTextBytes > MaxFileTextBytes {
		r.Add("max_text_bytes", fmt.Sprintf("%d is out of range; use 0 (name files only) to %d (1 MiB)", f.MaxTextBytes, MaxFileTextBytes))
	}
}

// SetDefaults fills in the agent's absent images settings.
func (im *AgentImages) SetDefaults(set section.Set) {
	section.Default(&im.MaxPerTurn, set, "max_per_turn", DefaultMaxImagesPerTurn)
	section.Default(&im.MaxBytesPerTurn, set, "max_bytes_per_turn", DefaultMaxImageBytesPerTurn)
}

// Check reports the agent's images settings' problems.
func (im AgentImages) Check(r section.Reporter) {
	if im.MaxPerTurn < 1 || im.MaxPerTurn > MaxImagesPerTurn {
		r.Add("max_per_turn", fmt.Sprintf("%d is out of range; use 1 to %d (vision: false shows none)", im.MaxPerTurn, MaxImagesPerTurn))
	}
	if im.MaxBytesPerTurn < 0 || im.MaxBytesPerTurn > MaxImageBytesPerTurn {
		r.Add("max_bytes_per_turn", fmt.Sprintf("%d is out of range; use 0 (only the turn's own photos) to %d (20 MiB)", im.MaxBytesPerTurn, MaxImageBytesPerTurn))
	}
}

// SetDefaults fills in the history limits the agent leaves out, each
// session kind's own (sessions.DefaultHistoryTurns).
func (h *History) SetDefaults(set section.Set) {
	for _, l := range h.limits() {
		section.Default(l.turns, set, l.key, sessions.DefaultHistoryTurns(l.kind))
	}
	if len(h.OmitToolResults) == 0 {
		h.OmitToolResults = nil
	}
}

// limits are the history limits, by key and session kind.
func (h *History) limits() []struct {
	key, kind string
	turns     *int
} {
	return []struct {
		key, kind string
		turns     *int
	}{
		{"channels", "channel", &h.Channels},
		{"cron", sessions.SurfaceCron, &h.Cron},
		{"webhook", sessions.SurfaceWebhook, &h.Webhook},
		{"cli", sessions.SurfaceCLI, &h.CLI},
		{"api", sessions.SurfaceAPI, &h.API},
		{"mcp", sessions.SurfaceMCP, &h.MCP},
	}
}

// Check reports the history limits' problems.
func (h History) Check(r section.Reporter) {
	for _, l := range h.limits() {
		if *l.turns < 1 {
			r.Add(l.key, fmt.Sprintf("%d is too small; keep at least 1 turn", *l.turns))
		}
	}
	for i, name := range h.OmitToolResults {
		if _, err := permissions.CompileToolPattern(name); err != nil {
			r.Add(fmt.Sprintf("omit_tool_results[%d]", i), fmt.Sprintf("%v; name a tool such as web_fetch, a pattern such as \"files__*\", or mcp:<server>", err))
		}
	}
}

// SetDefaults fills in the agent's absent compaction settings.
func (c *Compaction) SetDefaults(set section.Set) {
	section.Default(&c.Threshold, set, "threshold", DefaultCompactionThreshold)
	c.Model = strings.TrimSpace(c.Model)
	section.Default(&c.TailTurns, set, "tail_turns", DefaultTailTurns)
	section.Default(&c.TailBudgetPct, set, "tail_budget_pct", DefaultTailBudgetPct)
	section.Default(&c.SummaryMaxTokens, set, "summary_max_tokens", DefaultSummaryMaxTokens)
	section.Default(&c.Retries, set, "retries", DefaultSummaryRetries)
	section.Default(&c.FlushTimeout, set, "flush_timeout", Duration(DefaultFlushTimeout))
	section.Default(&c.SummaryTimeout, set, "summary_timeout", Duration(DefaultSummaryTimeout))
}

// Check reports the compaction settings' problems but reserve_tokens,
// which the agent checks against its window.
func (c Compaction) Check(r section.Reporter) {
	if t := c.Threshold; t < 0.1 || t > 0.95 {
		r.Add("threshold", fmt.Sprintf("%g is out of range; use a share of max_context_tokens from 0.1 to 0.95, such as 0.7", t))
	}
	if m := c.Model; m != "" {
		provider, name, ok := strings.Cut(m, "/")
		if _, known := llm.Lookup(provider); m != "echo" && (!ok || name == "" || !known || strings.ContainsAny(m, " \t\r\n")) {
			r.Add("model", fmt.Sprintf(`%q is not a model; %s, or leave it empty for the agent's own model`, m, modelRule))
		}
	}
	if c.TailTurns < 1 || c.TailTurns > 100 {
		r.Add("tail_turns", fmt.Sprintf("%d is out of range; keep 1-100 of the latest turns, such as 2", c.TailTurns))
	}
	if c.TailBudgetPct < 5 || c.TailBudgetPct > 90 {
		r.Add("tail_budget_pct", fmt.Sprintf("%d is out of range; use a percentage of the usable window from 5 to 90, such as 30", c.TailBudgetPct))
	}
	if c.SummaryMaxTokens < 128 || c.SummaryMaxTokens > 32768 {
		r.Add("summary_max_tokens", fmt.Sprintf("%d is out of range; use 128-32768, such as 1024", c.SummaryMaxTokens))
	}
	if c.Retries < 0 || c.Retries > 10 {
		r.Add("retries", fmt.Sprintf("%d is out of range; use 0-10, such as 2", c.Retries))
	}
	if c.FlushTimeout <= 0 {
		r.Add("flush_timeout", fmt.Sprintf(`%s is not allowed; the memory flush needs a deadline, such as "2m"`, c.FlushTimeout))
	}
	if c.SummaryTimeout <= 0 {
		r.Add("summary_timeout", fmt.Sprintf(`%s is not allowed; the summary needs a deadline, such as "3m"`, c.SummaryTimeout))
	}
}

// Check reports one agent's problems (ids of other agents are the
// root's to check), and caches its time zone.
func (a *Agent) Check(r section.Reporter) {
	switch {
	case a.ID == "":
		r.Add("id", "required; "+agentIDRule)
	case !agentID.MatchString(a.ID):
		r.Add("id", fmt.Sprintf("%q is not a valid agent id; %s", a.ID, agentIDRule))
	}

	provider, model, hasProvider := strings.Cut(a.Model, "/")
	_, known := llm.Lookup(provider)
	switch {
	case a.Model == "echo":
	case hasProvider && provider != "" && provider != "echo" && !known:
		r.Add("model", fmt.Sprintf(`%q is not a model: unknown provider %q; %s`, a.Model, provider, modelRule))
	case !known || model == "" || strings.ContainsAny(a.Model, " \t\r\n"):
		r.Add("model", fmt.Sprintf(`%q is not a model; %s`, a.Model, modelRule))
	}
	for i, f := range a.FallbackModels {
		fp, fm, ok := strings.Cut(f, "/")
		if _, known := llm.Lookup(fp); f != "echo" && (!ok || !known || fm == "" || strings.ContainsAny(f, " \t\r\n")) {
			r.Add(fmt.Sprintf("fallback_models[%d]", i), fmt.Sprintf(`%q is not a model; %s`, f, modelRule))
		}
	}
	for i, m := range a.Models {
		mp, mm, ok := strings.Cut(m, "/")
		if _, known := llm.Lookup(mp); m != "echo" && (!ok || !known || mm == "" || strings.ContainsAny(m, " \t\r\n")) {
			r.Add(fmt.Sprintf("models[%d]", i), fmt.Sprintf(`%q is not a model; %s`, m, modelRule))
		}
	}
	switch a.ReasoningEffort {
	case "", "low", "medium", "high":
	default:
		r.Add("reasoning_effort", fmt.Sprintf(`%q is not an effort; use low, medium or high, or leave it out`, a.ReasoningEffort))
	}
	if a.MaxSteps < 1 || a.MaxSteps > 100 {
		r.Add("max_steps", fmt.Sprintf("%d is out of range; use 1-100", a.MaxSteps))
	}
	if a.MaxOutputTokens < 1 || a.MaxOutputTokens > 200000 {
		r.Add("max_output_tokens", fmt.Sprintf("%d is out of range; use 1-200000", a.MaxOutputTokens))
	}
	switch a.VoiceReplies {
	case "off", "on", "when_spoken":
	default:
		r.Add("voice_replies", fmt.Sprintf(`%q is not a voice reply mode; use off, on or when_spoken`, a.VoiceReplies))
	}
	switch a.QueueMode {
	case "followup", "collect", "steer", "interrupt":
	default:
		r.Add("queue_mode", fmt.Sprintf(`%q is not a queue mode; use followup, collect, steer or interrupt`, a.QueueMode))
	}
	seen := map[string]int{}
	for i, tool := range a.Tools {
		key := fmt.Sprintf("tools[%d]", i)
		switch j, dup := seen[tool]; {
		case tool == "" || strings.ContainsAny(tool, " \t\r\n"):
			r.Add(key, fmt.Sprintf("%q is not a tool name; use the tool's name without spaces, such as \"memory_search\"", tool))
		case dup:
			r.Add(key, fmt.Sprintf("%q is listed as tools[%d] too; list each tool once", tool, j))
		default:
			seen[tool] = i
		}
	}
	if n, window := a.Compaction.ReserveTokens, a.MaxContextTokens; n < 0 || (n > 0 && window >= 1024 && n > window/2) {
		r.Add("compaction.reserve_tokens", fmt.Sprintf("%d is out of range; use 0 (min(20000, max_output_tokens)) up to half of max_context_tokens (%d)", n, window/2))
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"connect", a.Timeouts.Connect}, {"first_byte", a.Timeouts.FirstByte}, {"idle", a.Timeouts.Idle}, {"total", a.Timeouts.Total}} {
		if d.v < 0 {
			r.Add("timeouts."+d.key, fmt.Sprintf(`%s is negative; use a duration such as "5m", or 0s to keep the provider's`, d.v))
		}
	}
	if a.MaxContextTokens < 1024 {
		r.Add("max_context_tokens", fmt.Sprintf("%d is too small; use 1024 or more", a.MaxContextTokens))
	} else if a.MaxOutputTokens > a.MaxContextTokens/2 {
		// The reply's room is kept free of history; past half the window,
		// compaction would run on every turn.
		r.Add("max_output_tokens", fmt.Sprintf("%d is more than half of max_context_tokens (%d); a reply must leave room for the conversation, so use at most %d or raise max_context_tokens",
			a.MaxOutputTokens, a.MaxContextTokens, a.MaxContextTokens/2))
	}
	if a.IdleTimeoutMinutes < 0 {
		r.Add("idle_timeout_minutes", fmt.Sprintf("%d is negative; use a number of minutes, or 0 to turn the idle reset off", a.IdleTimeoutMinutes))
	}
	if h := a.DailyResetHour; h != nil && (*h < -1 || *h > 23) {
		r.Add("daily_reset_hour", fmt.Sprintf("%d is out of range; use 0-23, or -1 to turn the daily reset off", *h))
	}
	if loc, err := time.LoadLocation(a.Timezone); err != nil || a.Timezone == "" {
		r.Add("timezone", fmt.Sprintf(`unknown time zone %q; use an IANA name such as "Europe/Berlin" or "UTC"`, a.Timezone))
	} else {
		a.loc = loc
	}
}
