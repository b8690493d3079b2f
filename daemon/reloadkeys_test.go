package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/turns"
)

const reloadToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// reloadCase changes one key of the running config; a live key's applied
// checks, in the running daemon, that the reload put it in force.
type reloadCase struct {
	key     string
	change  func(c *config.Config)
	applied func(t *testing.T, d *Daemon) // nil: restart-only
}

func reloadCases(dir string) []reloadCase {
	sec := func(s string) config.Secret { return config.Secret(s) }
	dur := func(d time.Duration) config.Duration { return config.Duration(d) }
	restart := func(key string, change func(c *config.Config)) reloadCase {
		return reloadCase{key: key, change: change}
	}
	parsed := func(yaml string) *config.Config {
		c, err := config.Parse([]byte(yaml), "case.yaml", func(string) (string, bool) { return "", false })
		if err != nil {
			panic(err)
		}
		return c
	}
	running := func(get func(c *config.Config) any, want any) func(t *testing.T, d *Daemon) {
		return func(t *testing.T, d *Daemon) {
			t.Helper()
			if got := get(d.cfg()); !reflect.DeepEqual(got, want) {
				t.Fatalf("running config has %v, want %v", got, want)
			}
		}
	}
	return []reloadCase{
		restart("database.url", func(c *config.Config) { c.Database.URL = config.DSN(filepath.Join(dir, "other.db")) }),
		restart("database.history_cache_mb", func(c *config.Config) { c.Database.HistoryCacheMB = 3 }),
		restart("database.sqlite.synchronous", func(c *config.Config) { c.Database.SQLite.Synchronous = "normal" }),
		restart("database.sqlite.busy_timeout", func(c *config.Config) { c.Database.SQLite.BusyTimeout = dur(9 * time.Second) }),
		restart("database.sqlite.min_free_mb", func(c *config.Config) { c.Database.SQLite.MinFreeMB = 7 }),
		restart("database.postgres.max_conns", func(c *config.Config) { c.Database.Postgres.MaxConns = 7 }),
		restart("http.listen", func(c *config.Config) { c.HTTP.Listen = "127.0.0.1:1" }),
		restart("http.tokens", func(c *config.Config) { c.HTTP.Tokens = append(c.HTTP.Tokens, sec(strings.Repeat("b", 64))) }),
		restart("http.ops_listen", func(c *config.Config) { c.HTTP.OpsListen = "127.0.0.1:2" }),
		restart("http.callback_secret", func(c *config.Config) { c.HTTP.CallbackSecret = sec(strings.Repeat("c", 64)) }),
		restart("http.trusted_proxies", func(c *config.Config) { c.HTTP.TrustedProxies = []string{"10.0.0.0/8"} }),
		{key: "http.event_log_mb", change: func(c *config.Config) { c.HTTP.EventLogMB = 9 }, applied: func(t *testing.T, d *Daemon) {
			if got := d.events.MaxBytes(); got != 9<<20 {
				t.Fatalf("the event log is bounded at %d bytes, want %d", got, 9<<20)
			}
		}},
		{key: "http.max_title_chars", change: func(c *config.Config) { c.HTTP.MaxTitleChars = 1000 }, applied: func(t *testing.T, d *Daemon) {
			if code := apiPost(t, d, "/v1/sessions", `{"title":"`+strings.Repeat("t", 500)+`"}`); code != http.StatusCreated {
				t.Fatalf("a 500-character title under a limit of 1000: status %d, want 201", code)
			}
		}},
		{key: "http.max_metadata_bytes", change: func(c *config.Config) { c.HTTP.MaxMetadataBytes = 64 }, applied: func(t *testing.T, d *Daemon) {
			if code := apiPost(t, d, "/v1/sessions", `{"metadata":{"k":"`+strings.Repeat("m", 100)+`"}}`); code != http.StatusBadRequest {
				t.Fatalf("110 bytes of metadata under a limit of 64: status %d, want 400", code)
			}
		}},
		{key: "http.callback_allow", change: func(c *config.Config) { c.HTTP.CallbackAllow = []string{"127.0.0.1"} }, applied: func(t *testing.T, d *Daemon) {
			if err := d.callbacks.CheckURL("http://127.0.0.1:9/cb"); err != nil {
				t.Fatalf("a callback to an allowed loopback address is refused: %v", err)
			}
		}},
		{key: "http.mcp", change: func(c *config.Config) { c.HTTP.MCP = false }, applied: func(t *testing.T, d *Daemon) {
			if code := apiPost(t, d, "/mcp", `{}`); code != http.StatusNotFound {
				t.Fatalf("/mcp with http.mcp off: status %d, want 404", code)
			}
		}},
		restart("log.level", func(c *config.Config) { c.Log.Level = "debug" }),
		restart("log.format", func(c *config.Config) { c.Log.Format = "json" }),
		{key: "agents", change: func(c *config.Config) { c.Agents[0].Prompt = "a new prompt" },
			applied: running(func(c *config.Config) any { return c.Agents[0].Prompt }, "a new prompt")},
		restart("providers", func(c *config.Config) {
			c.Providers = llm.ProvidersConfig{"openai": {APIKey: sec("sk-other"), BaseURL: "http://127.0.0.1:3/v1", MaxConcurrent: 3}}
		}),
		restart("gateway.recovery", func(c *config.Config) { c.Gateway.Recovery = "mark" }),
		restart("gateway.queue_cap", func(c *config.Config) { c.Gateway.QueueCap = 5 }),
		restart("gateway.debounce", func(c *config.Config) { c.Gateway.Debounce = dur(time.Second) }),
		restart("gateway.shutdown_timeout", func(c *config.Config) { c.Gateway.ShutdownTimeout = dur(3 * time.Second) }),
		restart("gateway.replica_id", func(c *config.Config) { c.Gateway.ReplicaID = "r9" }),
		restart("gateway.replica_lease", func(c *config.Config) { c.Gateway.ReplicaLease = dur(20 * time.Second) }),
		restart("gateway.replica_heartbeat", func(c *config.Config) { c.Gateway.ReplicaHeartbeat = dur(4 * time.Second) }),
		restart("gateway.advertise_url", func(c *config.Config) { c.Gateway.AdvertiseURL = "http://127.0.0.1:5" }),
		{key: "bindings", change: func(c *config.Config) {
			c.Bindings = []config.Binding{{Agent: c.Agents[0].ID, Adapter: "api", Chat: "x"}}
		}, applied: running(func(c *config.Config) any { return len(c.Bindings) }, 1)},
		restart("memory.index", func(c *config.Config) {
			c.Memory.Index, c.Memory.Typesense.URL, c.Memory.Typesense.APIKey = "typesense", "http://127.0.0.1:6", sec("k")
		}),
		restart("memory.typesense.url", func(c *config.Config) { c.Memory.Typesense.URL = "http://127.0.0.1:6" }),
		restart("memory.typesense.api_key", func(c *config.Config) { c.Memory.Typesense.APIKey = sec("k") }),
		restart("memory.typesense.collection", func(c *config.Config) { c.Memory.Typesense.Collection = "other" }),
		restart("memory.typesense.timeout", func(c *config.Config) { c.Memory.Typesense.Timeout = dur(9 * time.Second) }),
		{key: "hooks", change: func(c *config.Config) {
			c.Hooks = append(c.Hooks, parsed("hooks:\n  - id: added\n    auth: token\n    secret: \""+strings.Repeat("h", 40)+"\"\n    prompt: \"{{.q}}\"\n").Hooks...)
		}, applied: func(t *testing.T, d *Daemon) {
			if code := apiPost(t, d, "/hooks/added", `{"q":"hi"}`, strings.Repeat("h", 40)); code != http.StatusAccepted {
				t.Fatalf("a hook the reload added: status %d, want 202", code)
			}
		}},
		{key: "mcp.servers", change: func(c *config.Config) {
			c.MCP.Servers = append(c.MCP.Servers, config.MCPServer{ID: "added", URL: "http://127.0.0.1:7/mcp"})
		}, applied: func(t *testing.T, d *Daemon) {
			if !slices.ContainsFunc(d.mcp.Statuses(), func(s mcptools.Status) bool { return s.ID == "added" }) {
				t.Fatalf("the MCP server the reload added is not among %+v", d.mcp.Statuses())
			}
		}},
		{key: "budgets.user_daily_tokens", change: func(c *config.Config) { c.Budgets.UserDailyTokens = 5 },
			applied: running(func(c *config.Config) any { return c.Budgets.UserDailyTokens }, int64(5))},
		{key: "budgets.session_daily_tokens", change: func(c *config.Config) { c.Budgets.SessionDailyTokens = 5 },
			applied: running(func(c *config.Config) any { return c.Budgets.SessionDailyTokens }, int64(5))},
		{key: "budgets.agent_daily_tokens", change: func(c *config.Config) { c.Budgets.AgentDailyTokens = 5 },
			applied: running(func(c *config.Config) any { return c.Budgets.AgentDailyTokens }, int64(5))},
		{key: "budgets.user_daily_usd", change: func(c *config.Config) { c.Budgets.UserDailyUSD = 5 },
			applied: running(func(c *config.Config) any { return c.Budgets.UserDailyUSD }, 5.0)},
		{key: "budgets.session_daily_usd", change: func(c *config.Config) { c.Budgets.SessionDailyUSD = 5 },
			applied: running(func(c *config.Config) any { return c.Budgets.SessionDailyUSD }, 5.0)},
		{key: "budgets.agent_daily_usd", change: func(c *config.Config) { c.Budgets.AgentDailyUSD = 5 },
			applied: running(func(c *config.Config) any { return c.Budgets.AgentDailyUSD }, 5.0)},
		{key: "budgets.prices", change: func(c *config.Config) {
			c.Budgets.Prices = []config.Price{{Model: "openai/gpt-4o-mini", Input: 1, Output: 2}}
		}, applied: running(func(c *config.Config) any { p, _ := c.Budgets.Price("openai/gpt-4o-mini"); return p.Output }, 2.0)},
		{key: "cron.jobs", change: func(c *config.Config) {
			c.Cron.Jobs = append(c.Cron.Jobs, parsed("cron:\n  jobs:\n    - id: added\n      schedule: \"0 3 * * *\"\n      prompt: report\n").Cron.Jobs...)
		}, applied: func(t *testing.T, d *Daemon) {
			jobs, err := d.cron.Store().List(context.Background())
			if err != nil || !slices.ContainsFunc(jobs, func(j cron.Job) bool { return j.ID == "added" }) {
				t.Fatalf("the cron job the reload added is not stored: %v %+v", err, jobs)
			}
		}},
		{key: "permissions.ask_timeout", change: func(c *config.Config) { c.Permissions.AskTimeout = dur(7 * time.Second) }, applied: func(t *testing.T, d *Daemon) {
			if got := d.perms.AskTimeout(); got != 7*time.Second {
				t.Fatalf("permission asks wait %s, want 7s", got)
			}
		}},
		{key: "permissions.rules", change: func(c *config.Config) {
			c.Permissions.Rules = []permissions.ConfigProjectRule{{Tool: "memory_write", Action: "deny"}}
		}, applied: running(func(c *config.Config) any { return len(c.Permissions.Rules) }, 1)},
		{key: "permissions.shared_group_grants", change: func(c *config.Config) { c.Permissions.SharedGroupGrants = true }, applied: func(t *testing.T, d *Daemon) {
			if !d.perms.SharedGroupGrants() {
				t.Fatal("group grants are still per person after the reload shared them")
			}
		}},
		{key: "sessions.prune_archived_after", change: func(c *config.Config) { c.Sessions.PruneArchivedAfter = dur(48 * time.Hour) },
			applied: running(func(c *config.Config) any { return c.Sessions.PruneArchivedAfter.Std() }, 48*time.Hour)},
		{key: "sessions.kv.max_value_bytes", change: func(c *config.Config) { c.Sessions.KV.MaxValueBytes = 77 }, applied: func(t *testing.T, d *Daemon) {
			if got := d.kv.Limits(); got.MaxValueBytes != 77 {
				t.Fatalf("kv limits %+v, want max value bytes 77", got)
			}
		}},
		{key: "sessions.kv.max_session_bytes", change: func(c *config.Config) { c.Sessions.KV.MaxSessionBytes = 7777 }, applied: func(t *testing.T, d *Daemon) {
			if got := d.kv.Limits(); got.MaxSessionBytes != 7777 {
				t.Fatalf("kv limits %+v, want max session bytes 7777", got)
			}
		}},
		{key: "sessions.kv.max_keys", change: func(c *config.Config) { c.Sessions.KV.MaxKeys = 7 }, applied: func(t *testing.T, d *Daemon) {
			if got := d.kv.Limits(); got != (kv.Limits{MaxValueBytes: got.MaxValueBytes, MaxSessionBytes: got.MaxSessionBytes, MaxKeys: 7}) {
				t.Fatalf("kv limits %+v, want max keys 7", got)
			}
		}},
		{key: "sessions.files.max_file_bytes", change: func(c *config.Config) { c.Sessions.Files.MaxFileBytes = 77 }, applied: func(t *testing.T, d *Daemon) {
			if got := d.files.Limits(); got.MaxFileBytes != 77 {
				t.Fatalf("file store limits %+v, want max file bytes 77", got)
			}
		}},
		{key: "sessions.files.max_session_bytes", change: func(c *config.Config) { c.Sessions.Files.MaxSessionBytes = 150 << 20 }, applied: func(t *testing.T, d *Daemon) {
			if got := d.files.Limits(); got.MaxSessionBytes != 150<<20 {
				t.Fatalf("file store limits %+v, want max session bytes 150 MiB", got)
			}
		}},
		{key: "sessions.files.max_total_bytes", change: func(c *config.Config) { c.Sessions.Files.MaxTotalBytes = 9 << 30 }, applied: func(t *testing.T, d *Daemon) {
			if got := d.files.Limits(); got.MaxTotalBytes != 9<<30 {
				t.Fatalf("file store limits %+v, want max total bytes 9 GiB", got)
			}
		}},
		{key: "sessions.sql.max_bytes", change: func(c *config.Config) { c.Sessions.SQL.MaxBytes = 1 << 20 }, applied: func(t *testing.T, d *Daemon) {
			if got := d.sql.Limits(); got.MaxBytes != 1<<20 {
				t.Fatalf("session SQL limits %+v, want max bytes 1 MiB", got)
			}
		}},
		{key: "sessions.sql.max_rows", change: func(c *config.Config) { c.Sessions.SQL.MaxRows = 9 }, applied: func(t *testing.T, d *Daemon) {
			if got := d.sql.Limits(); got.MaxRows != 9 {
				t.Fatalf("session SQL limits %+v, want max rows 9", got)
			}
		}},
		{key: "sessions.sql.statement_timeout", change: func(c *config.Config) { c.Sessions.SQL.StatementTimeout = dur(time.Second) }, applied: func(t *testing.T, d *Daemon) {
			if got := d.sql.Limits(); got.Timeout != time.Second {
				t.Fatalf("session SQL limits %+v, want a 1s timeout", got)
			}
		}},
		{key: "session_hooks", change: func(c *config.Config) {
			c.SessionHooks = []config.SessionHook{{URL: "http://127.0.0.1:9/events", Secret: sec(strings.Repeat("e", 40)), Events: []string{"session.created"}}}
		}, applied: func(t *testing.T, d *Daemon) {
			if code := apiPost(t, d, "/v1/sessions", `{"title":"hooked"}`); code != http.StatusCreated {
				t.Fatalf("create a session: status %d", code)
			}
			var n int
			if err := d.db.Reader().QueryRowContext(context.Background(), `SELECT count(*) FROM session_hook_events WHERE url = 'http://127.0.0.1:9/events'`).Scan(&n); err != nil || n != 1 {
				t.Fatalf("%d events queued for the hook the reload added (%v), want the new session's", n, err)
			}
		}},
		{key: "harnesses", change: func(c *config.Config) {
			c.Harnesses = []config.Harness{{ID: "added", Capabilities: []string{"sql"}}}
		}, applied: func(t *testing.T, d *Daemon) {
			if code := apiPost(t, d, "/v1/sessions", `{"harness":"added"}`); code != http.StatusCreated {
				t.Fatalf("a session on the harness the reload added: status %d", code)
			}
		}},
		{key: "sessions.client_tools.timeout", change: func(c *config.Config) { c.Sessions.ClientTools.Timeout = dur(7 * time.Second) }, applied: func(t *testing.T, d *Daemon) {
			if got := d.clientTools.Timeout(); got != 7*time.Second {
				t.Fatalf("client tools wait %s, want 7s", got)
			}
		}},
		{key: "skills.dirs", change: func(c *config.Config) { c.Skills.Dirs = []string{dir} }, applied: func(t *testing.T, d *Daemon) {
			if got := turns.SkillDirs(d.cfg(), d.cfg().Agents[0]); !slices.Contains(got, dir) {
				t.Fatalf("skills folders %v, want %s among them", got, dir)
			}
		}},
		{key: "adapters", change: func(c *config.Config) { c.Adapters[0].Allow = []string{"42"} },
			applied: running(func(c *config.Config) any { return c.Adapters[0].Allow }, []string{"42"})},
		restart("adapters.tg", func(c *config.Config) { c.Adapters[0].Stream = !c.Adapters[0].Stream }),
		restart("adapters.tg", func(c *config.Config) { c.Adapters[0].Workspace = "team-a" }),
		restart("adapters.other (added)", func(c *config.Config) {
			c.Adapters = append(c.Adapters, parsed("adapters:\n  - id: other\n    type: telegram\n").Adapters...)
		}),
		restart("secrets.key_file", func(c *config.Config) { c.Secrets.KeyFile = filepath.Join(dir, "other.key") }),
		restart("speech.base_url", func(c *config.Config) { c.Speech.BaseURL = "http://127.0.0.1:6/v1" }),
		restart("speech.api_key", func(c *config.Config) { c.Speech.APIKey = sec("k") }),
		restart("speech.model", func(c *config.Config) { c.Speech.Model = "whisper-large-v3" }),
		restart("speech.language", func(c *config.Config) { c.Speech.Language = "de" }),
		restart("speech.max_bytes", func(c *config.Config) { c.Speech.MaxBytes = 1000 }),
		restart("speech.max_seconds", func(c *config.Config) { c.Speech.MaxSeconds = 30 }),
		restart("speech.timeout", func(c *config.Config) { c.Speech.Timeout = dur(9 * time.Second) }),
		restart("speech.voice_model", func(c *config.Config) { c.Speech.VoiceModel = "tts-1-hd" }),
		restart("speech.voice", func(c *config.Config) { c.Speech.Voice = "nova" }),
		restart("telemetry.otlp.endpoint", func(c *config.Config) { c.Telemetry.OTLP.Endpoint = "http://127.0.0.1:4318" }),
		restart("telemetry.otlp.protocol", func(c *config.Config) { c.Telemetry.OTLP.Protocol = "grpc" }),
		restart("telemetry.sample_ratio", func(c *config.Config) { c.Telemetry.SampleRatio = 0.5 }),
		restart("telemetry.resource_attributes", func(c *config.Config) {
			c.Telemetry.ResourceAttributes = map[string]string{"deployment.environment": "staging"}
		}),
		restart("telemetry.record_content", func(c *config.Config) { c.Telemetry.RecordContent = true }),
	}
}

// apiPost posts body to the daemon's path with the API token (or token)
// and says the status.
func apiPost(t *testing.T, d *Daemon, path, body string, token ...string) int {
	t.Helper()
	bearer := reloadToken
	if len(token) > 0 {
		bearer = token[0]
	}
	req, err := http.NewRequest("POST", "http://"+d.listen+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Every config key is classed: applied live by a reload, or changed only at
// a restart; a new key with no class fails here until it has one.
func TestReloadClassesEveryKey(t *testing.T) {
	keys := config.Keys(reflect.TypeFor[config.Config](), "")
	covered := map[string]bool{}
	for _, c := range reloadCases(t.TempDir()) {
		covered[c.key] = true
	}
	for _, k := range keys {
		if _, ok := config.ClassOf(k); !ok {
			t.Errorf("config key %s has no reload class: add it to config.ReloadKeys (live, with what applies it, or restart)", k)
		}
		if !covered[k] {
			t.Errorf("config key %s has no case in reloadCases showing what a reload does with it", k)
		}
	}
	// A channel's entry: the access keys change live, every other key of
	// the entry itself is compared by channelChanges.
	entry := []string{"id", "type", "stream", "workspace"}
	for _, k := range config.Keys(reflect.TypeFor[config.Adapter](), "") {
		top, _, _ := strings.Cut(k, ".")
		if !slices.Contains(config.AdapterAccessKeys, top) && !slices.Contains(entry, top) {
			t.Errorf("a channel's key %s is neither an access key a reload applies nor compared as restart-only", k)
		}
	}
}

// A reload applies each live key to the running daemon, and refuses a
// change of any restart-only key whole, naming it and changing nothing.
func TestReloadAppliesLiveKeysAndRefusesRestartOnes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "other.key"), []byte(strings.Repeat("k", 64)), 0o600); err != nil {
		t.Fatal(err)
	}
	path, _ := writeConfigTB(t, "http:\n  listen: 127.0.0.1:0\n  tokens: [\""+reloadToken+"\"]\n  callback_secret: \""+strings.Repeat("s", 64)+"\"\n"+
		"adapters:\n  - id: tg\n    type: telegram\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	base := func() *config.Config {
		c, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range reloadCases(dir) {
		t.Run(tc.key, func(t *testing.T) {
			next := base()
			tc.change(next)
			before := d.cfg()
			err := d.Reload(ctx, next, nil)
			if tc.applied == nil {
				if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), "restart") {
					t.Fatalf("a change of restart-only %s: reload says %v, want a refusal naming it", tc.key, err)
				}
				if d.cfg() != before {
					t.Fatalf("a refused reload changed the running config")
				}
				return
			}
			if err != nil {
				t.Fatalf("a change of live %s: reload refused: %v", tc.key, err)
			}
			tc.applied(t, d)
			if err := d.Reload(ctx, base(), nil); err != nil {
				t.Fatalf("reload back to the first config: %v", err)
			}
		})
	}
}
