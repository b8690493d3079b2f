package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/internal/lazyregexp"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
)

var agentID = idPattern{max: 64, more: "_-"}

// idPattern is an id's rule: 1 to max characters from a-z, 0-9 and more,
// starting with a letter or a digit. It is checked by hand: the agents'
// and the channels' ids are checked at every start, and compiling a
// regexp for them took most of the time loading the config did.
type idPattern struct {
	max  int
	more string
}

// MatchString reports whether s is such an id.
func (p idPattern) MatchString(s string) bool {
	if s == "" || len(s) > p.max {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && strings.IndexByte(p.more, c) >= 0:
		default:
			return false
		}
	}
	return true
}

const modelRule = `use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`

const agentIDRule = `use 1-64 characters from a-z, 0-9, "_" and "-", starting with a letter or digit`

// validate adds a problem to ck for every invalid setting, and caches each
// agent's time zone.
func (c *Config) validate(ck *checker) {
	c.Database.validate(ck)
	c.HTTP.validate(ck)
	c.Log.validate(ck)
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		if _, ok := llm.Lookup(name); !ok {
			ck.add("providers."+name, fmt.Sprintf("%q is not a provider parley knows; use one of %s", name, strings.Join(llm.Providers()[1:], ", ")))
			continue
		}
		c.Providers[name].validate(ck, "providers."+name+".")
	}
	c.Gateway.validate(ck)
	c.Memory.validate(ck)
	c.validateAdapters(ck)
	c.validateHooks(ck)
	c.validateCron(ck)
	c.checkMCP(ck)
	c.checkSessionHooks(ck)
	c.checkHarnesses(ck)
	c.Budgets.validate(ck)
	c.checkPermissions(ck)
	c.Sessions.validate(ck)
	c.checkSpeech(ck)
	c.checkTelemetry(ck)
	c.Skills.check(ck)
	c.noSecretRefs(ck)

	firstUse := map[string]int{}
	for i := range c.Agents {
		a := &c.Agents[i]
		p := fmt.Sprintf("agents[%d].", i)
		a.validate(ck, p)
		if a.ID == "" {
			continue
		}
		if j, dup := firstUse[a.ID]; dup {
			ck.add(p+"id", fmt.Sprintf("%q is used by agents[%d] too; agent ids must be unique", a.ID, j))
			continue
		}
		firstUse[a.ID] = i
	}

	ids := make([]string, 0, len(c.Agents))
	for _, a := range c.Agents {
		if a.ID != "" {
			ids = append(ids, a.ID)
		}
	}
	known := "use the id of one of the agents: " + strings.Join(ids, ", ")
	for i, a := range c.Agents {
		seen := map[string]int{}
		for j, id := range a.Subagents {
			key := fmt.Sprintf("agents[%d].subagents[%d]", i, j)
			switch k, dup := seen[id]; {
			case dup:
				ck.add(key, fmt.Sprintf("%q is listed as subagents[%d] too; list each agent once", id, k))
			case id == a.ID && id != "":
				ck.add(key, fmt.Sprintf("%q is this agent; an agent may always hand tasks to itself, so leave it out", id))
			default:
				if _, ok := firstUse[id]; !ok {
					ck.add(key, fmt.Sprintf("%q is not an agent; %s", id, known))
				}
			}
			seen[id] = j
		}
	}
	for i, b := range c.Bindings {
		p := fmt.Sprintf("bindings[%d]", i)
		switch _, ok := firstUse[b.Agent]; {
		case b.Agent == "":
			ck.add(p+".agent", "required; "+known)
		case !ok:
			ck.add(p+".agent", fmt.Sprintf("%q is not an agent; %s", b.Agent, known))
		}
		if b.Workspace != "" && !sessions.ValidWorkspaceID(b.Workspace) {
			ck.add(p+".workspace", fmt.Sprintf("%q is not a workspace id; %s", b.Workspace, sessions.WorkspaceIDRule))
		}
		if b.Adapter == "" && b.Chat == "" && b.User == "" {
			ck.add(p, "sets none of adapter, chat and user, so it matches everything; "+
				"put that agent first in agents instead, or name the adapter, chat or user it is for")
		}
	}
}

func (p Provider) validate(ck *checker, prefix string) {
	if strings.ContainsAny(p.APIKey.Reveal(), " \t\r\n") {
		// Never quote the key itself.
		ck.add(prefix+"api_key", "contains spaces or line breaks; an API key is a single word, e.g. ${OPENAI_API_KEY}")
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"connect", p.Timeouts.Connect}, {"first_byte", p.Timeouts.FirstByte}, {"idle", p.Timeouts.Idle}, {"total", p.Timeouts.Total}} {
		if d.v <= 0 {
			ck.add(prefix+"timeouts."+d.key, fmt.Sprintf(`%s is not allowed: every model call needs a deadline; use a duration above 0 such as "2m"`, d.v))
		}
	}
	if p.MaxConcurrent < 0 || p.MaxConcurrent > 10000 {
		ck.add(prefix+"max_concurrent", fmt.Sprintf("%d is out of range; use 1-10000, or 0 for no cap", p.MaxConcurrent))
	}
	if p.BaseURL == "" {
		return
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL may hold a password, so show it redacted.
		ck.add(prefix+"base_url", fmt.Sprintf(`%q is not an http:// or https:// URL; use one such as "http://localhost:11434/v1" (Ollama) `+
			`or "https://openrouter.ai/api/v1", or leave it empty for the provider's own API`, DSN(p.BaseURL).String()))
	}
}

func (g Gateway) validate(ck *checker) {
	switch g.Recovery {
	case "rerun", "mark":
	default:
		ck.add("gateway.recovery", fmt.Sprintf(`%q is not allowed; use "rerun" (answer messages left unanswered by a crash) `+
			`or "mark" (mark them failed without answering)`, g.Recovery))
	}
	if n := g.QueueCap; n < 1 || n > 1000 {
		ck.add("gateway.queue_cap", fmt.Sprintf("%d is out of range; use 1-1000", n))
	}
	if d := g.Debounce; d < 0 || d.Std() > 10*time.Second {
		ck.add("gateway.debounce", fmt.Sprintf(`%s is out of range; use a duration from 0 (off) to 10s, such as "500ms"`, d))
	}
	if g.ShutdownTimeout <= 0 {
		ck.add("gateway.shutdown_timeout", fmt.Sprintf(`%s is not allowed; use a duration above 0 such as "30s"`, g.ShutdownTimeout))
	}
	if g.ReplicaHeartbeat < Duration(100*time.Millisecond) {
		ck.add("gateway.replica_heartbeat", fmt.Sprintf(`%s is too short; use 100ms or more, such as "1s"`, g.ReplicaHeartbeat))
	} else if g.ReplicaLease < 3*g.ReplicaHeartbeat {
		ck.add("gateway.replica_lease", fmt.Sprintf(`%s is too short for a heartbeat of %s; use at least three heartbeats, such as "5s" with "1s"`, g.ReplicaLease, g.ReplicaHeartbeat))
	}
	if u := g.AdvertiseURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		ck.add("gateway.advertise_url", fmt.Sprintf(`%q is not an http:// or https:// URL; give the address other replicas reach this one's API at, such as "http://10.0.0.5:8080"`, u))
	}
}

func (d Database) validate(ck *checker) {
	raw := strings.TrimSpace(d.URL.Reveal())
	if _, err := dbutil.ParseURL(raw); err != nil {
		msg := strings.TrimPrefix(err.Error(), "database.url ")
		if _, perr := url.Parse(raw); perr != nil && d.Engine() == "sqlite" && strings.Contains(strings.ToLower(raw), "postgres") {
			msg = "not a valid PostgreSQL URL: " + describeURLError(perr) +
				`; use postgres://user:password@host:5432/dbname, with special characters in the password %-escaped`
		}
		ck.add("database.url", msg)
	}

	switch d.SQLite.Synchronous {
	case "full", "normal":
	default:
		ck.add("database.sqlite.synchronous", fmt.Sprintf(`%q is not allowed; use "full" (an acknowledged message survives power loss) `+
			`or "normal" (faster, but the last commits can be lost on power loss)`, d.SQLite.Synchronous))
	}
	if d.SQLite.BusyTimeout <= 0 {
		ck.add("database.sqlite.busy_timeout", fmt.Sprintf(`%s is not allowed; use a duration above 0 such as "5s"`, d.SQLite.BusyTimeout))
	}
	if n := d.HistoryCacheMB; n < 0 || n > 4096 {
		ck.add("database.history_cache_mb", fmt.Sprintf("%d is out of range; use 0-4096 (0 keeps no history in memory)", n))
	}
	if d.SQLite.MinFreeMB < 0 {
		ck.add("database.sqlite.min_free_mb", fmt.Sprintf("%d is below 0; use 0 to turn the check off", d.SQLite.MinFreeMB))
	}
	if n := d.Postgres.MaxConns; n < 1 || n > 1000 {
		ck.add("database.postgres.max_conns", fmt.Sprintf("%d is out of range; use 1-1000", n))
	}
}

// describeURLError says what is wrong with a URL without quoting it: net/url
// errors include the whole URL, and an escape error a piece of the password.
func describeURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ee url.EscapeError
	if errors.As(err, &ee) {
		return `a "%" is not followed by two hex digits (write a literal % as %25)`
	}
	var he url.InvalidHostError
	if errors.As(err, &he) {
		return "invalid character in the host name"
	}
	msg := err.Error()
	if strings.Contains(msg, "port") {
		return "invalid port"
	}
	if strings.Contains(msg, "userinfo") {
		return "invalid user name or password (%-escape special characters)"
	}
	return "it does not parse"
}

// MinSecretLen is the fewest bytes an API token or a signing secret (a
// hook's, the reply callbacks') may have.
const MinSecretLen = 32

// placeholderSecrets are secrets parley's docs have shown. A copy of the
// docs must not go live with one, whatever its length.
var placeholderSecrets = []string{"change-me-to-a-long-secret"}

// placeholderWords mark a secret someone meant to replace.
var placeholderWords = []string{"change-me", "changeme", "change_me", "replace-me", "replaceme", "your-secret", "your_secret"}

// weakSecret says what is wrong with a secret, or "" when nothing is. env
// names the variable the docs suggest keeping it in.
func weakSecret(s, env string) string {
	how := fmt.Sprintf(`; make one with "openssl rand -hex 32" and set it from the environment, such as "${%s}"`, env)
	lower := strings.ToLower(strings.TrimSpace(s))
	if strings.Contains(s, secretRefPrefix) {
		return "" // a stored secret: checked once resolved (weakResolvedSecrets)
	}
	if slices.Contains(placeholderSecrets, lower) {
		return "is the placeholder parley's docs show, which anyone can read" + how
	}
	for _, w := range placeholderWords {
		if strings.Contains(lower, w) {
			return fmt.Sprintf("is a placeholder (it says %q), which anyone can guess%s", w, how)
		}
	}
	if len(s) < MinSecretLen {
		return fmt.Sprintf("is %d bytes, too short to resist guessing; use at least %d random bytes%s", len(s), MinSecretLen, how)
	}
	return ""
}

func (h HTTP) validate(ck *checker) {
	for i, t := range h.Tokens {
		if msg := weakSecret(t.Reveal(), "PARLEY_API_TOKEN"); msg != "" {
			ck.add(fmt.Sprintf("http.tokens[%d]", i), msg)
		}
	}
	if cs := h.CallbackSecret.Reveal(); cs != "" {
		if msg := weakSecret(cs, "PARLEY_CALLBACK_SECRET"); msg != "" {
			ck.add("http.callback_secret", msg+`, or leave it empty to turn reply callbacks off`)
		}
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"http.event_log_mb", h.EventLogMB}, {"http.max_title_chars", h.MaxTitleChars}, {"http.max_metadata_bytes", h.MaxMetadataBytes}} {
		if n.v < 1 {
			ck.add(n.key, fmt.Sprintf("%d is below 1; leave it out for the default", n.v))
		}
	}
	for i, e := range h.CallbackAllow {
		if !callbackAllowEntry(e) {
			ck.add(fmt.Sprintf("http.callback_allow[%d]", i), fmt.Sprintf(`%q is not an IP address, a CIDR network or a host name; use such as "10.0.0.0/8", "127.0.0.1" or "hooks.internal"`, e))
		}
	}
	const use = `; use host:port such as "127.0.0.1:8080", "[::1]:8080" or ":8080"`
	if h.OpsListen != "" {
		if _, _, err := net.SplitHostPort(h.OpsListen); err != nil {
			ck.add("http.ops_listen", fmt.Sprintf("%q is not host:port%s, or leave it empty to serve health and metrics on http.listen", h.OpsListen, use))
		}
	}
	_, port, err := net.SplitHostPort(h.Listen)
	if err != nil {
		ck.add("http.listen", fmt.Sprintf("%q is not host:port%s", h.Listen, use))
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		ck.add("http.listen", fmt.Sprintf("port %q is not a number from 0 to 65535%s", port, use))
	}
}

func (l Log) validate(ck *checker) {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		ck.add("log.level", fmt.Sprintf("%q is not a log level; use debug, info, warn or error", l.Level))
	}
	switch l.Format {
	case "text", "json":
	default:
		ck.add("log.format", fmt.Sprintf("%q is not a log format; use text or json", l.Format))
	}
}

// validate checks one agent; p is its key prefix such as "agents[0].".
func (a *Agent) validate(ck *checker, p string) {
	switch {
	case a.ID == "":
		ck.add(p+"id", "required; "+agentIDRule)
	case !agentID.MatchString(a.ID):
		ck.add(p+"id", fmt.Sprintf("%q is not a valid agent id; %s", a.ID, agentIDRule))
	}

	provider, model, hasProvider := strings.Cut(a.Model, "/")
	_, known := llm.Lookup(provider)
	switch {
	case a.Model == "echo":
	case hasProvider && provider != "" && provider != "echo" && !known:
		ck.add(p+"model", fmt.Sprintf(`%q is not a model: unknown provider %q; %s`, a.Model, provider, modelRule))
	case !known || model == "" || strings.ContainsAny(a.Model, " \t\r\n"):
		ck.add(p+"model", fmt.Sprintf(`%q is not a model; %s`, a.Model, modelRule))
	}
	for i, f := range a.FallbackModels {
		fp, fm, ok := strings.Cut(f, "/")
		if _, known := llm.Lookup(fp); f != "echo" && (!ok || !known || fm == "" || strings.ContainsAny(f, " \t\r\n")) {
			ck.add(fmt.Sprintf("%sfallback_models[%d]", p, i), fmt.Sprintf(`%q is not a model; %s`, f, modelRule))
		}
	}
	for i, m := range a.Models {
		mp, mm, ok := strings.Cut(m, "/")
		if _, known := llm.Lookup(mp); m != "echo" && (!ok || !known || mm == "" || strings.ContainsAny(m, " \t\r\n")) {
			ck.add(fmt.Sprintf("%smodels[%d]", p, i), fmt.Sprintf(`%q is not a model; %s`, m, modelRule))
		}
	}
	switch a.ReasoningEffort {
	case "", "low", "medium", "high":
	default:
		ck.add(p+"reasoning_effort", fmt.Sprintf(`%q is not an effort; use low, medium or high, or leave it out`, a.ReasoningEffort))
	}
	if a.MaxSteps < 1 || a.MaxSteps > 100 {
		ck.add(p+"max_steps", fmt.Sprintf("%d is out of range; use 1-100", a.MaxSteps))
	}
	if a.MaxOutputTokens < 1 || a.MaxOutputTokens > 200000 {
		ck.add(p+"max_output_tokens", fmt.Sprintf("%d is out of range; use 1-200000", a.MaxOutputTokens))
	}
	if a.Images.MaxPerTurn < 1 || a.Images.MaxPerTurn > MaxImagesPerTurn {
		ck.add(p+"images.max_per_turn", fmt.Sprintf("%d is out of range; use 1 to %d (vision: false shows none)", a.Images.MaxPerTurn, MaxImagesPerTurn))
	}
	if a.Images.MaxBytesPerTurn < 0 || a.Images.MaxBytesPerTurn > MaxImageBytesPerTurn {
		ck.add(p+"images.max_bytes_per_turn", fmt.Sprintf("%d is out of range; use 0 (only the turn's own photos) to %d (20 MiB)", a.Images.MaxBytesPerTurn, MaxImageBytesPerTurn))
	}
	if a.Files.MaxTextBytes < 0 || a.Files.MaxTextBytes > MaxFileTextBytes {
		ck.add(p+"files.max_text_bytes", fmt.Sprintf("%d is out of range; use 0 (name files only) to %d (1 MiB)", a.Files.MaxTextBytes, MaxFileTextBytes))
	}
	switch a.VoiceReplies {
	case "off", "on", "when_spoken":
	default:
		ck.add(p+"voice_replies", fmt.Sprintf(`%q is not a voice reply mode; use off, on or when_spoken`, a.VoiceReplies))
	}
	switch a.QueueMode {
	case "followup", "collect", "steer", "interrupt":
	default:
		ck.add(p+"queue_mode", fmt.Sprintf(`%q is not a queue mode; use followup, collect, steer or interrupt`, a.QueueMode))
	}
	seen := map[string]int{}
	for i, tool := range a.Tools {
		key := fmt.Sprintf("%stools[%d]", p, i)
		switch j, dup := seen[tool]; {
		case tool == "" || strings.ContainsAny(tool, " \t\r\n"):
			ck.add(key, fmt.Sprintf("%q is not a tool name; use the tool's name without spaces, such as \"memory_search\"", tool))
		case dup:
			ck.add(key, fmt.Sprintf("%q is listed as tools[%d] too; list each tool once", tool, j))
		default:
			seen[tool] = i
		}
	}
	if t := a.Compaction.Threshold; t < 0.1 || t > 0.95 {
		ck.add(p+"compaction.threshold", fmt.Sprintf("%g is out of range; use a share of max_context_tokens from 0.1 to 0.95, such as 0.7", t))
	}
	if m := a.Compaction.Model; m != "" {
		provider, name, ok := strings.Cut(m, "/")
		if _, known := llm.Lookup(provider); m != "echo" && (!ok || name == "" || !known || strings.ContainsAny(m, " \t\r\n")) {
			ck.add(p+"compaction.model", fmt.Sprintf(`%q is not a model; %s, or leave it empty for the agent's own model`, m, modelRule))
		}
	}
	a.Compaction.validate(ck, p+"compaction.", a.MaxContextTokens)
	for _, d := range []struct {
		key string
		v   Duration
	}{{"connect", a.Timeouts.Connect}, {"first_byte", a.Timeouts.FirstByte}, {"idle", a.Timeouts.Idle}, {"total", a.Timeouts.Total}} {
		if d.v < 0 {
			ck.add(p+"timeouts."+d.key, fmt.Sprintf(`%s is negative; use a duration such as "5m", or 0s to keep the provider's`, d.v))
		}
	}
	if a.MaxContextTokens < 1024 {
		ck.add(p+"max_context_tokens", fmt.Sprintf("%d is too small; use 1024 or more", a.MaxContextTokens))
	} else if a.MaxOutputTokens > a.MaxContextTokens/2 {
		// The reply's room is kept free of history; past half the window,
		// compaction would run on every turn.
		ck.add(p+"max_output_tokens", fmt.Sprintf("%d is more than half of max_context_tokens (%d); a reply must leave room for the conversation, so use at most %d or raise max_context_tokens",
			a.MaxOutputTokens, a.MaxContextTokens, a.MaxContextTokens/2))
	}
	if a.IdleTimeoutMinutes < 0 {
		ck.add(p+"idle_timeout_minutes", fmt.Sprintf("%d is negative; use a number of minutes, or 0 to turn the idle reset off", a.IdleTimeoutMinutes))
	}
	if h := a.DailyResetHour; h != nil && (*h < -1 || *h > 23) {
		ck.add(p+"daily_reset_hour", fmt.Sprintf("%d is out of range; use 0-23, or -1 to turn the daily reset off", *h))
	}
	if loc, err := time.LoadLocation(a.Timezone); err != nil || a.Timezone == "" {
		ck.add(p+"timezone", fmt.Sprintf(`unknown time zone %q; use an IANA name such as "Europe/Berlin" or "UTC"`, a.Timezone))
	} else {
		a.loc = loc
	}

	for _, h := range []struct {
		key   string
		turns int
	}{
		{"channels", a.History.Channels},
		{"cron", a.History.Cron},
		{"webhook", a.History.Webhook},
		{"cli", a.History.CLI},
		{"api", a.History.API},
		{"mcp", a.History.MCP},
	} {
		if h.turns < 1 {
			ck.add(p+"history."+h.key, fmt.Sprintf("%d is too small; keep at least 1 turn", h.turns))
		}
	}
	for i, name := range a.History.OmitToolResults {
		if _, err := permissions.CompileToolPattern(name); err != nil {
			ck.add(fmt.Sprintf("%shistory.omit_tool_results[%d]", p, i), fmt.Sprintf("%v; name a tool such as web_fetch, a pattern such as \"files__*\", or mcp:<server>", err))
		}
	}
}

// validate checks an agent's compaction keys past threshold and model; p
// is their prefix such as "agents[0].compaction.".
func (c Compaction) validate(ck *checker, p string, window int) {
	if c.TailTurns < 1 || c.TailTurns > 100 {
		ck.add(p+"tail_turns", fmt.Sprintf("%d is out of range; keep 1-100 of the latest turns, such as 2", c.TailTurns))
	}
	if c.TailBudgetPct < 5 || c.TailBudgetPct > 90 {
		ck.add(p+"tail_budget_pct", fmt.Sprintf("%d is out of range; use a percentage of the usable window from 5 to 90, such as 30", c.TailBudgetPct))
	}
	if c.SummaryMaxTokens < 128 || c.SummaryMaxTokens > 32768 {
		ck.add(p+"summary_max_tokens", fmt.Sprintf("%d is out of range; use 128-32768, such as 1024", c.SummaryMaxTokens))
	}
	if c.ReserveTokens < 0 || (c.ReserveTokens > 0 && window >= 1024 && c.ReserveTokens > window/2) {
		ck.add(p+"reserve_tokens", fmt.Sprintf("%d is out of range; use 0 (min(20000, max_output_tokens)) up to half of max_context_tokens (%d)", c.ReserveTokens, window/2))
	}
	if c.Retries < 0 || c.Retries > 10 {
		ck.add(p+"retries", fmt.Sprintf("%d is out of range; use 0-10, such as 2", c.Retries))
	}
	if c.FlushTimeout <= 0 {
		ck.add(p+"flush_timeout", fmt.Sprintf(`%s is not allowed; the memory flush needs a deadline, such as "2m"`, c.FlushTimeout))
	}
	if c.SummaryTimeout <= 0 {
		ck.add(p+"summary_timeout", fmt.Sprintf(`%s is not allowed; the summary needs a deadline, such as "3m"`, c.SummaryTimeout))
	}
}

func (m Memory) validate(ck *checker) {
	switch m.Index {
	case "builtin":
	case "typesense":
		if m.Typesense.URL == "" {
			ck.add("memory.typesense.url", `required when memory.index is "typesense"; use the server's address, such as "http://127.0.0.1:8108"`)
		} else if u, err := url.Parse(m.Typesense.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ck.add("memory.typesense.url", fmt.Sprintf(`%q is not an http(s) URL; use the server's address, such as "http://127.0.0.1:8108"`, m.Typesense.URL))
		}
		if m.Typesense.APIKey == "" {
			ck.add("memory.typesense.api_key", `required when memory.index is "typesense"; set it from the environment, such as "${TYPESENSE_API_KEY}"`)
		}
	default:
		ck.add("memory.index", fmt.Sprintf(`%q is not allowed; use "builtin" (full-text search in the database) or "typesense"`, m.Index))
	}
	if m.Typesense.Timeout <= 0 {
		ck.add("memory.typesense.timeout", fmt.Sprintf(`%s is not allowed; use a duration above 0 such as "5s"`, m.Typesense.Timeout))
	}
}

// hostName is a DNS host name: dot-separated labels of letters, digits and
// inner hyphens.
var hostName = lazyregexp.New(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$`)

// callbackAllowEntry reports whether e is an IP address, a CIDR network or
// a host name (what api.ParseCallbackAllow takes).
func callbackAllowEntry(e string) bool {
	e = strings.TrimSpace(e)
	if _, err := netip.ParsePrefix(e); err == nil {
		return true
	}
	if _, err := netip.ParseAddr(e); err == nil {
		return true
	}
	return len(e) <= 253 && hostName.MatchString(e)
}
