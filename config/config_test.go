package config

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/permissions"
)

func TestDefault(t *testing.T) {
	c := Default()
	ck := newChecker("")
	c.validate(ck)
	if len(ck.problems) > 0 {
		t.Fatalf("defaults don't validate:\n%v", ck.problems)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"database.url", c.Database.URL.Reveal(), "data/parley.db"},
		{"engine", c.Database.Engine(), "sqlite"},
		{"sqlite path", c.Database.SQLitePath(), "data/parley.db"},
		{"database.sqlite.synchronous", c.Database.SQLite.Synchronous, "full"},
		{"database.sqlite.busy_timeout", c.Database.SQLite.BusyTimeout.Std(), 5 * time.Second},
		{"database.postgres.max_conns", c.Database.Postgres.MaxConns, 10},
		{"database.history_cache_mb", c.Database.HistoryCacheMB, 16},
		{"http.listen", c.HTTP.Listen, "127.0.0.1:8080"},
		{"http.mcp", c.HTTP.MCP, true},
		{"log.level", c.Log.Level, "info"},
		{"log.format", c.Log.Format, "text"},
		{"agent count", len(c.Agents), 1},
		{"agents[0].id", c.Agents[0].ID, "default"},
		{"agents[0].model", c.Agents[0].Model, "echo"},
		{"agents[0].max_context_tokens", c.Agents[0].MaxContextTokens, 128000},
		{"agents[0].idle_timeout_minutes", c.Agents[0].IdleTimeoutMinutes, 0},
		{"agents[0].daily_reset_hour", *c.Agents[0].DailyResetHour, 4},
		{"agents[0].timezone", c.Agents[0].Timezone, "Local"},
		{"agents[0].location", c.Agents[0].Location(), time.Local},
		{"agents[0].history", c.Agents[0].History, History{Channels: 30, Cron: 10, Webhook: 10, CLI: 50, API: 50, MCP: 50}},
		{"agents[0].prompt", c.Agents[0].Prompt, "You are a helpful assistant."},
		{"agents[0].workspace", c.Agents[0].Workspace, ""},
		{"agents[0].tools", c.Agents[0].Tools, []string(nil)},
		{"agents[0].max_steps", c.Agents[0].MaxSteps, 10},
		{"agents[0].queue_mode", c.Agents[0].QueueMode, "followup"},
		{"agents[0].max_output_tokens", c.Agents[0].MaxOutputTokens, 4096},
		{"providers", c.Providers, llm.ProvidersConfig(nil)},
		{"gateway.recovery", c.Gateway.Recovery, "rerun"},
		{"gateway.queue_cap", c.Gateway.QueueCap, 20},
		{"gateway.debounce", c.Gateway.Debounce.Std(), 500 * time.Millisecond},
		{"gateway.shutdown_timeout", c.Gateway.ShutdownTimeout.Std(), 30 * time.Second},
		{"bindings", c.Bindings, []Binding(nil)},
		{"missing keys", c.MissingKeys(), []string(nil)},
		{"route", c.Route("tg-main", "1", "2"), "default"},
	}
	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestAgentDefaultsApplyToEveryAgent(t *testing.T) {
	c := mustParse(t, "agents:\n  - id: a\n    history:\n      cli: 7\n  - id: b\n    model: openai/gpt-4o-mini\n", nil)
	want := Default().Agents[0]
	for i, a := range c.Agents {
		want.ID, want.Model, want.History.CLI = a.ID, a.Model, a.History.CLI
		if !reflect.DeepEqual(a, want) {
			t.Errorf("agents[%d] = %+v, want %+v", i, a, want)
		}
	}
	if c.Agents[0].History.CLI != 7 || c.Agents[0].History.API != 50 {
		t.Errorf("agents[0].history = %+v, want cli 7 and the other defaults", c.Agents[0].History)
	}
}

func TestDatabaseHelpers(t *testing.T) {
	tests := []struct {
		url, engine, path string
	}{
		{"data/parley.db", "sqlite", "data/parley.db"},
		{"/var/lib/parley/parley.db", "sqlite", "/var/lib/parley/parley.db"},
		{"file:data/parley.db", "sqlite", "data/parley.db"},
		{"file:///var/lib/parley.db?mode=rwc", "sqlite", "/var/lib/parley.db"},
		{"sqlite:data/parley.db", "sqlite", "data/parley.db"},
		{"SQLite://data/parley.db", "sqlite", "data/parley.db"},
		{"postgres://u:p@db/parley", "postgres", ""},
		{"PostgreSQL://db/parley", "postgres", ""},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			d := dbutil.Config{URL: DSN(tc.url)}
			if got := d.Engine(); got != tc.engine {
				t.Errorf("Engine() = %q, want %q", got, tc.engine)
			}
			if tc.engine == "sqlite" && d.SQLitePath() != tc.path {
				t.Errorf("SQLitePath() = %q, want %q", d.SQLitePath(), tc.path)
			}
		})
	}
}

func TestAgentHelpers(t *testing.T) {
	c := mustParse(t, "agents:\n"+
		"  - id: a\n    idle_timeout_minutes: 90\n    timezone: Asia/Tokyo\n"+
		"  - id: b\n    daily_reset_hour: -1\n    timezone: UTC\n"+
		"  - id: c\n    daily_reset_hour: 0\n", nil)
	tests := []struct {
		id       string
		idle     time.Duration
		hour     int
		on       bool
		location string
	}{
		{"a", 90 * time.Minute, 4, true, "Asia/Tokyo"},
		{"b", 0, 0, false, "UTC"},
		{"c", 0, 0, true, "Local"},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			a, ok := c.Agent(tc.id)
			if !ok {
				t.Fatalf("Agent(%q) not found", tc.id)
			}
			if a.IdleTimeout() != tc.idle {
				t.Errorf("IdleTimeout() = %v, want %v", a.IdleTimeout(), tc.idle)
			}
			if hour, on := a.DailyReset(); hour != tc.hour || on != tc.on {
				t.Errorf("DailyReset() = %d, %v; want %d, %v", hour, on, tc.hour, tc.on)
			}
			if got := a.Location().String(); got != tc.location {
				t.Errorf("Location() = %q, want %q", got, tc.location)
			}
		})
	}
	if _, ok := c.Agent("missing"); ok {
		t.Error(`Agent("missing") found an agent`)
	}
}

func TestLocationOnUnvalidatedAgent(t *testing.T) {
	tests := []struct {
		timezone string
		want     *time.Location
	}{
		{"", time.Local},
		{"Local", time.Local},
		{"UTC", time.UTC},
		{"Not/AZone", time.UTC},
	}
	for _, tc := range tests {
		t.Run(tc.timezone, func(t *testing.T) {
			if got := (Agent{Timezone: tc.timezone}).Location(); got.String() != tc.want.String() {
				t.Errorf("Location() = %v, want %v", got, tc.want)
			}
		})
	}
	if hour, on := (Agent{}).DailyReset(); hour != DefaultDailyResetHour || !on {
		t.Errorf("zero Agent DailyReset() = %d, %v; want the default", hour, on)
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"5s", 5 * time.Second, false},
		{"1m30s", 90 * time.Second, false},
		{"250ms", 250 * time.Millisecond, false},
		{"5", 0, true},
		{"soon", 0, true},
		{"[5s]", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var d Duration
			err := yaml.Unmarshal([]byte(tc.in), &d)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Unmarshal(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), `expected a duration such as "5s" or "1m30s"`) {
					t.Errorf("error %q does not explain the format", err)
				}
				return
			}
			if d.Std() != tc.want {
				t.Errorf("got %v, want %v", d, tc.want)
			}
			out, err := yaml.Marshal(d)
			if err != nil || strings.TrimSpace(string(out)) != tc.want.String() {
				t.Errorf("yaml.Marshal = %q, %v; want %q", out, err, tc.want.String())
			}
			out, err = json.Marshal(d)
			if err != nil || string(out) != `"`+tc.want.String()+`"` {
				t.Errorf("json.Marshal = %s, %v; want %q", out, err, tc.want.String())
			}
		})
	}
}

func TestExampleFile(t *testing.T) {
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("parses with no environment", func(t *testing.T) {
		c, err := Parse(data, "config.example.yaml", nil)
		if err != nil {
			t.Fatalf("example has problems:\n%v", err)
		}
		if len(c.Agents) != 2 || c.Agents[0].ID != "default" || c.Agents[1].ID != "family" {
			t.Fatalf("agents = %+v, want default and family", c.Agents)
		}
		if got := c.Agents[1].Location().String(); got != "Europe/Berlin" {
			t.Errorf("family location = %q, want Europe/Berlin", got)
		}
		// The first agent shows every default, so it must equal them, but
		// for the permission rules it shows (there are none by default).
		if len(c.Agents[0].Permissions) != 2 {
			t.Errorf("example agents[0].permissions = %+v, want two rules", c.Agents[0].Permissions)
		}
		shown := c.Agents[0]
		shown.Permissions = nil
		if want := Default().Agents[0]; !reflect.DeepEqual(shown, want) {
			t.Errorf("example agents[0] = %+v, want the defaults %+v", shown, want)
		}
		// The example's bindings are checked below; there are none by default.
		wantBindings := []Binding{
			{Agent: "family", Adapter: "tg-main", Chat: "-1001234567890"},
			{Agent: "default", Chat: "-1001234567890", User: "123456789"},
		}
		if !reflect.DeepEqual(c.Bindings, wantBindings) {
			t.Errorf("example bindings = %+v, want %+v", c.Bindings, wantBindings)
		}
		// The example's adapter shows the gateway's defaults for its keys.
		if len(c.Adapters) != 3 || c.Adapters[1].Type != "discord" || c.Adapters[2].Type != "whatsapp" || c.Adapters[0].ID != "tg-main" || c.Adapters[0].Type != "telegram" ||
			c.Adapters[0].DMPolicy != DefaultDMPolicy || c.Adapters[0].GroupPolicy != DefaultGroupPolicy || len(c.Adapters[0].Allow) != 0 {
			t.Errorf("example adapters = %+v", c.Adapters)
		}
		var tg struct {
			Token Secret `yaml:"token"`
		}
		if err := c.Adapters[0].Decode(&tg); err != nil || tg.Token != "" {
			t.Errorf("the example's telegram token with no environment = %q, %v; want empty", tg.Token, err)
		}
		want := Default()
		want.Agents = c.Agents
		want.Bindings = c.Bindings
		want.Adapters = c.Adapters
		// No live hook ships: a copy of the example must not accept
		// requests signed with a secret anyone can read.
		if len(c.Hooks) != 0 {
			t.Errorf("example hooks = %+v, want none live", c.Hooks)
		}
		want.Cron = c.Cron
		// The example's MCP server starts only when an agent names it.
		if len(c.MCP.Servers) != 1 || c.MCP.Servers[0].Command == "" || c.MCP.Servers[0].Timeout != DefaultMCPTimeout {
			t.Errorf("example mcp = %+v", c.MCP)
		}
		want.MCP = c.MCP
		// The example's price table gives a cost to nothing until a cap is set.
		if c.Budgets.Any() || len(c.Budgets.Prices) != 1 {
			t.Errorf("example budgets = %+v", c.Budgets)
		}
		want.Budgets = c.Budgets
		// Its project rule is an example; the ask timeout is the default.
		if len(c.Permissions.Rules) != 1 || c.Permissions.AskTimeout != Duration(permissions.DefaultAskTimeout) {
			t.Errorf("example permissions = %+v", c.Permissions)
		}
		want.Permissions = c.Permissions
		// Its harness is there for sessions that name it; no agent does.
		if len(c.Harnesses) != 1 || c.Harnesses[0].ID != "notebook" || len(c.Harnesses[0].Capabilities) != 2 {
			t.Errorf("example harnesses = %+v", c.Harnesses)
		}
		want.Harnesses = c.Harnesses
		want.file, want.lines = c.file, c.lines
		if !reflect.DeepEqual(c, want) {
			t.Errorf("example settings = %+v, want the defaults %+v", c, want)
		}
		if got := c.Route("tg-main", "-1001234567890", "555"); got != "family" {
			t.Errorf("example routes the family chat to %q, want family", got)
		}
		if got := c.Route("tg-main", "-1001234567890", "123456789"); got != "default" {
			t.Errorf("example routes the listed user to %q, want default", got)
		}
		if got := c.MissingKeys(); got != nil {
			t.Errorf("MissingKeys() = %q, want none: the example uses echo", got)
		}
	})
	t.Run("uses the environment", func(t *testing.T) {
		c, err := Parse(data, "config.example.yaml", env(map[string]string{
			"PARLEY_DATABASE_URL": "postgres://parley:pw@db/parley",
			"PARLEY_FAMILY_MODEL": "anthropic/claude-sonnet-4-5",
			"PARLEY_MODEL":        "openai/gpt-4o-mini",
			"OPENAI_BASE_URL":     "http://localhost:11434/v1",
			"ANTHROPIC_API_KEY":   password,
		}))
		if err != nil {
			t.Fatalf("example has problems:\n%v", err)
		}
		if c.Database.Engine() != "postgres" || c.Agents[1].Model != "anthropic/claude-sonnet-4-5" {
			t.Errorf("env not applied: engine %q, family model %q", c.Database.Engine(), c.Agents[1].Model)
		}
		if c.Providers["openai"].BaseURL != "http://localhost:11434/v1" || c.Providers["openai"].APIKey != "" ||
			c.Providers["anthropic"].APIKey.Reveal() != password || c.Providers["anthropic"].BaseURL != "" {
			t.Errorf("providers env not applied: %+v", c.Providers)
		}
		if got := c.MissingKeys(); got != nil {
			t.Errorf("MissingKeys() = %q, want none", got)
		}
	})
	hooks := uncommentHooks(t, data)
	t.Run("the commented-out hook works once its secret is set", func(t *testing.T) {
		secret := "3f9a1c0e7b2d4a6f8e1c3b5d7f9a0c2e4b6d8f1a3c5e7b9d0f2a4c6e8b1d3f5a"
		c, err := Parse(hooks, "config.example.yaml", env(map[string]string{"CI_HOOK_SECRET": secret, "PARLEY_HOOK_SECRET": secret}))
		if err != nil {
			t.Fatalf("example with its hook has problems:\n%v", err)
		}
		if len(c.SessionHooks) != 1 || c.SessionHooks[0].Secret.Reveal() != secret || !c.SessionHooks[0].Wants("session.reset", "default") ||
			c.SessionHooks[0].Wants("session.compacted", "default") || c.SessionHooks[0].Wants("session.reset", "family") {
			t.Errorf("example session hooks = %+v", c.SessionHooks)
		}
		if len(c.Hooks) != 1 || c.Hooks[0].ID != "ci" || c.Hooks[0].Secret.Reveal() != secret || c.Hooks[0].Mode != DefaultHookMode ||
			c.Hooks[0].Timeout.Std() != DefaultHookTimeout || c.Hooks[0].Template() == nil {
			t.Errorf("example hooks = %+v", c.Hooks)
		}
		_, err = Parse(hooks, "config.example.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), "hooks[0].secret: environment variable CI_HOOK_SECRET is not set") {
			t.Errorf("the hook without CI_HOOK_SECRET: %v; want an error naming the variable", err)
		}
	})
	t.Run("documents every key", func(t *testing.T) {
		var doc yaml.Node
		if err := yaml.Unmarshal(hooks, &doc); err != nil {
			t.Fatal(err)
		}
		ck := newChecker("config.example.yaml")
		ck.check(doc.Content[0], reflect.TypeFor[Config](), "")
		var missing []string
		for _, key := range leafKeys(reflect.TypeFor[Config](), "") {
			if _, ok := ck.lines[key]; !ok {
				missing = append(missing, key)
			}
		}
		if len(missing) > 0 {
			t.Errorf("config.example.yaml does not show: %s", strings.Join(missing, ", "))
		}
	})
}

// uncommentHooks returns the example with its commented-out hooks section
// ("# hooks:" and the "#" lines after it) uncommented.
func uncommentHooks(t *testing.T, data []byte) []byte {
	t.Helper()
	lines := strings.Split(string(data), "\n")
	start := slices.Index(lines, "# hooks:")
	if start < 0 {
		t.Fatal(`config.example.yaml has no "# hooks:" line`)
	}
	for i := start; i < len(lines) && strings.HasPrefix(lines[i], "#"); i++ {
		lines[i] = strings.TrimPrefix(strings.TrimPrefix(lines[i], "#"), " ")
	}
	return []byte(strings.Join(lines, "\n"))
}

// leafKeys lists every settable key path in t, using agents[0] for lists of
// mappings. A list of plain values, such as agents[0].tools, is one key.
func leafKeys(t reflect.Type, path string) []string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Struct:
		return []string{path}
	case t.Kind() == reflect.Slice:
		return leafKeys(t.Elem(), path+"[0]")
	case t.Kind() == reflect.Struct && t != durationType:
		names, fields := yamlFields(t)
		var keys []string
		for _, name := range names {
			keys = append(keys, leafKeys(fields[name], joinKey(path, name))...)
		}
		sort.Strings(keys)
		return keys
	}
	return []string{path}
}

// /mcp is served unless http.mcp says false.
func TestHTTPMCPSwitch(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       bool
	}{
		{"absent", "log:\n  level: info\n", true},
		{"true", "http:\n  mcp: true\n", true},
		{"false", "http:\n  mcp: false\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "parley.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.HTTP.MCP != tc.want {
				t.Fatalf("http.mcp = %v, want %v", c.HTTP.MCP, tc.want)
			}
		})
	}
}
