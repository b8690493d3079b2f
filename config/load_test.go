package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil"
)

func TestParseStructureProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // every problem, in order, as Problem.Error prints it
	}{
		{
			name: "unknown top-level key",
			src:  "log:\n  level: info\ndatabse:\n  url: x.db\n",
			want: []string{`parley.yaml:3: unknown key "databse"; did you mean "database"? (known keys: database, http, log, agents, providers, gateway, bindings, memory, adapters, hooks, mcp, budgets, cron, permissions, sessions, skills, secrets, speech, session_hooks, harnesses, telemetry)`},
		},
		{
			name: "unknown nested key",
			src:  "database:\n  url: x.db\n  sqlite:\n    synchronous: full\n\n\n    sync: normal\n",
			want: []string{`parley.yaml:7: unknown key "database.sqlite.sync" (known keys: synchronous, busy_timeout, min_free_mb)`},
		},
		{
			name: "unknown key in a list element",
			src:  "agents:\n  - id: a\n  - id: b\n    modle: echo\n",
			want: []string{`parley.yaml:4: unknown key "agents[1].modle"; did you mean "agents[1].model"? (known keys: id, model, prompt, workspace, tools, max_steps, queue_mode, max_output_tokens, vision, max_context_tokens, compaction, idle_timeout_minutes, daily_reset_hour, timezone, history, files, images, voice_replies, fallback_models, models, reasoning_effort, timeouts, permissions, subagents, harness)`},
		},
		{
			name: "unknown key deep in a list element",
			src:  "agents:\n  - id: a\n    history:\n      chanels: 3\n",
			want: []string{`parley.yaml:4: unknown key "agents[0].history.chanels"; did you mean "agents[0].history.channels"? (known keys: channels, cron, webhook, cli, api, mcp, omit_tool_results)`},
		},
		{
			name: "keys are not expanded",
			src:  "${X}: 1\n",
			want: []string{`parley.yaml:1: unknown key "${X}" (known keys: database, http, log, agents, providers, gateway, bindings, memory, adapters, hooks, mcp, budgets, cron, permissions, sessions, skills, secrets, speech, session_hooks, harnesses, telemetry)`},
		},
		{
			name: "duplicate key",
			src:  "log:\n  level: info\n  format: json\n  level: debug\n",
			want: []string{`parley.yaml:4: duplicate key "log.level" (first set on line 2)`},
		},
		{
			name: "duplicate key in a list element",
			src:  "agents:\n  - id: a\n    id: b\n",
			want: []string{`parley.yaml:3: duplicate key "agents[0].id" (first set on line 2)`},
		},
		{
			name: "bad integer",
			src:  "agents:\n  - id: a\n    max_context_tokens: lots\n",
			want: []string{`parley.yaml:3: agents[0].max_context_tokens: expected an integer, got "lots"`},
		},
		{
			name: "fraction for an integer",
			src:  "database:\n  postgres:\n    max_conns: 1.5\n",
			want: []string{`parley.yaml:3: database.postgres.max_conns: expected an integer, got "1.5"`},
		},
		{
			name: "quoted integer",
			src:  "agents:\n  - id: a\n    daily_reset_hour: \"5\"\n",
			want: []string{`parley.yaml:3: agents[0].daily_reset_hour: expected an integer, got "5"; remove the quotes`},
		},
		{
			name: "bad duration",
			src:  "database:\n  sqlite:\n    busy_timeout: 5\n",
			want: []string{`parley.yaml:3: database.sqlite.busy_timeout: expected a duration such as "5s" or "1m30s", got "5"`},
		},
		{
			name: "scalar for a list",
			src:  "agents: default\n",
			want: []string{`parley.yaml:1: agents: expected a list, got "default"`},
		},
		{
			name: "scalar for a mapping",
			src:  "agents:\n  - id: a\n    history: 5\n",
			want: []string{`parley.yaml:3: agents[0].history: expected a mapping of keys, got "5"`},
		},
		{
			name: "list for a string",
			src:  "log:\n  level: [info]\n",
			want: []string{`parley.yaml:2: log.level: expected a string, got a list`},
		},
		{
			name: "top level is not a mapping",
			src:  "- a\n- b\n",
			want: []string{`parley.yaml:1: expected a mapping of keys, got a list`},
		},
		{
			name: "syntax error",
			src:  "log:\n  level: \"info\n",
			want: []string{`parley.yaml:2: invalid YAML: found unexpected end of stream`},
		},
		{
			name: "two documents",
			src:  "log:\n  level: info\n---\nlog:\n  level: debug\n",
			want: []string{`parley.yaml:3: found a second YAML document; put all the settings in one`},
		},
		{
			name: "every problem is reported, in line order",
			src: "databse: {}\n" +
				"agents:\n" +
				"  - id: a\n" +
				"    modle: echo\n" +
				"    daily_reset_hour: 24\n" +
				"    max_context_tokens: lots\n" +
				"log:\n" +
				"  level: loud\n",
			want: []string{
				`parley.yaml:1: unknown key "databse"; did you mean "database"? (known keys: database, http, log, agents, providers, gateway, bindings, memory, adapters, hooks, mcp, budgets, cron, permissions, sessions, skills, secrets, speech, session_hooks, harnesses, telemetry)`,
				`parley.yaml:4: unknown key "agents[0].modle"; did you mean "agents[0].model"? (known keys: id, model, prompt, workspace, tools, max_steps, queue_mode, max_output_tokens, vision, max_context_tokens, compaction, idle_timeout_minutes, daily_reset_hour, timezone, history, files, images, voice_replies, fallback_models, models, reasoning_effort, timeouts, permissions, subagents, harness)`,
				`parley.yaml:5: agents[0].daily_reset_hour: 24 is out of range; use 0-23, or -1 to turn the daily reset off`,
				`parley.yaml:6: agents[0].max_context_tokens: expected an integer, got "lots"`,
				`parley.yaml:8: log.level: "loud" is not a log level; use debug, info, warn or error`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, nil)
			ps := problemsOf(t, err)
			var got []string
			for _, p := range ps {
				got = append(got, p.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if err.Error() != strings.Join(tc.want, "\n") {
				t.Errorf("Error() = %q, want one problem per line", err.Error())
			}
		})
	}
}

func TestParseAnchorsAndMerges(t *testing.T) {
	src := "agents:\n" +
		"  - &base\n" +
		"    id: a\n" +
		"    timezone: UTC\n" +
		"    history: &hist\n" +
		"      cli: 5\n" +
		"  - <<: *base\n" +
		"    id: b\n" +
		"    history: *hist\n"
	c := mustParse(t, src, nil)
	b, ok := c.Agent("b")
	if !ok || b.Timezone != "UTC" || b.History.CLI != 5 || b.History.API != 50 {
		t.Errorf("agent b = %+v, want the merged timezone and history", b)
	}

	_, err := Parse([]byte("agents:\n  - &base\n    id: a\n    zone: UTC\n  - <<: *base\n    id: b\n"), testFile, nil)
	ps := problemsOf(t, err)
	if len(ps) != 2 || ps[0].Key != "agents[0].zone" || ps[1].Key != "agents[1].zone" || ps[1].Line != 4 {
		t.Errorf("problems = %#v, want agents[0].zone and agents[1].zone, both at line 4", ps)
	}
}

func TestParseProblemFields(t *testing.T) {
	_, err := Parse([]byte("agents:\n  - id: a\n    max_context_tokens: lots\n"), testFile, nil)
	ps := problemsOf(t, err)
	want := Problem{File: testFile, Line: 3, Key: "agents[0].max_context_tokens", Message: `expected an integer, got "lots"`}
	if len(ps) != 1 || ps[0] != want {
		t.Errorf("problems = %#v, want [%#v]", ps, want)
	}
}

func TestParseEmptyGivesDefaults(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"empty", ""},
		{"blank lines", "\n\n  \n"},
		{"comments only", "# nothing here yet\n\n# database:\n#   url: x.db\n"},
		{"empty document", "---\n"},
		{"null sections", "database:\nhttp:\nlog:\nagents:\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustParse(t, tc.src, nil)
			got.file, got.lines = "", nil // where keys were: nowhere
			if want := Default(); !reflect.DeepEqual(got, want) {
				t.Errorf("Parse(%q) = %+v, want defaults %+v", tc.src, got, want)
			}
		})
	}
}

func TestParseEnvExpansion(t *testing.T) {
	vars := map[string]string{
		"DB":      "postgres://u:pw@db/parley",
		"EMPTY":   "",
		"MODEL":   "openai/gpt-4o-mini",
		"CONNS":   "25",
		"SPECIAL": "weird: name # not a comment\n- [x]",
		"DOLLAR":  "a$b${NOT_EXPANDED}",
	}
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, c *Config)
	}{
		{"set variable", "database:\n  url: ${DB}\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), "postgres://u:pw@db/parley")
		}},
		{"empty variable", "database:\n  url: ${EMPTY}\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), dbutil.DefaultURL)
		}},
		{"unset variable with an empty fallback inside text", "database:\n  url: data/${NOPE:-}parley.db\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), "data/parley.db")
		}},
		{"fallback when unset", "database:\n  url: ${NOPE:-other.db}\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), "other.db")
		}},
		{"fallback when empty", "database:\n  url: ${EMPTY:-other.db}\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), "other.db")
		}},
		{"no fallback when set", "database:\n  url: ${DB:-other.db}\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), "postgres://u:pw@db/parley")
		}},
		{"empty fallback", "log:\n  level: ${NOPE:-}\n", func(t *testing.T, c *Config) {
			equal(t, c.Log.Level, DefaultLogLevel)
		}},
		{"$$ is a literal $", "database:\n  url: pa$$word-$${DB}.db\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), "pa$word-${DB}.db")
		}},
		{"lone $ is kept", "database:\n  url: cost$5-$\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), "cost$5-$")
		}},
		{"expanded text is not expanded again", "database:\n  url: ${DOLLAR}\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), "a$b${NOT_EXPANDED}")
		}},
		{"inside a list", "agents:\n  - id: a\n  - id: b\n    model: ${MODEL}\n", func(t *testing.T, c *Config) {
			equal(t, c.Agents[1].Model, "openai/gpt-4o-mini")
		}},
		{"unquoted number", "database:\n  postgres:\n    max_conns: ${CONNS}\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.Postgres.MaxConns, 25)
		}},
		{"unquoted number from fallback", "agents:\n  - id: a\n    daily_reset_hour: ${NOPE:-0}\n", func(t *testing.T, c *Config) {
			equal(t, *c.Agents[0].DailyResetHour, 0)
		}},
		{"special characters don't change the structure", "database:\n  url: ${SPECIAL}\nlog:\n  level: debug\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), vars["SPECIAL"])
			equal(t, c.Log.Level, "debug")
		}},
		{"quoted", "database:\n  url: \"${NOPE:-a b.db}\"\n", func(t *testing.T, c *Config) {
			equal(t, c.Database.URL.Reveal(), "a b.db")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, mustParse(t, tc.src, vars))
		})
	}
}

func equal[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParseEnvExpansionErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"unterminated", "log:\n  level: info\ndatabase:\n  url: ${DB\n",
			`parley.yaml:4: database.url: "${" has no closing "}"; write ${NAME} or ${NAME:-default}, or $$ for a literal $`},
		{"name starts with a digit", "agents:\n  - id: a\n    model: ${1BAD}\n",
			`parley.yaml:3: agents[0].model: "1BAD" is not an environment variable name; use letters, digits and "_", not starting with a digit, as in ${NAME} or ${NAME:-default}`},
		{"empty name", "log:\n  level: ${}\n",
			`parley.yaml:2: log.level: "" is not an environment variable name; use letters, digits and "_", not starting with a digit, as in ${NAME} or ${NAME:-default}`},
		{"colon without dash hides the rest", "database:\n  url: ${DB:hunter2}\n",
			`parley.yaml:2: database.url: "${DB:..." is not a reference; use ${NAME} or ${NAME:-default}`},
		{"unterminated with a fallback hides the rest", "database:\n  url: ${DB:-hunter2\n",
			`parley.yaml:2: database.url: "${" has no closing "}"; write ${NAME} or ${NAME:-default}, or $$ for a literal $`},
		// Unset without a fallback is an error: a forgotten export must not
		// quietly run on the default database (data/parley.db).
		{"unset variable", "database:\n  url: ${MY_DB_URL}\n",
			`parley.yaml:2: database.url: environment variable MY_DB_URL is not set; export it, or write ${MY_DB_URL:-} where empty is fine, or ${MY_DB_URL:-default} for a default`},
		{"unset variable inside text", "database:\n  url: data/${NOPE}parley.db\n",
			`parley.yaml:2: database.url: environment variable NOPE is not set; export it, or write ${NOPE:-} where empty is fine, or ${NOPE:-default} for a default`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, env(map[string]string{"DB": "x.db"}))
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].Error() != tc.want {
				t.Errorf("got:\n%v\nwant:\n%s", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error leaks the fallback text: %v", err)
			}
		})
	}
}

func TestFind(t *testing.T) {
	tests := []struct {
		name          string
		flag          string
		env           *string // nil: PARLEY_CONFIG unset
		createDefault bool
		wantPath      string
		wantExplicit  bool
	}{
		{name: "flag wins", flag: "a.yaml", env: ptr("b.yaml"), createDefault: true, wantPath: "a.yaml", wantExplicit: true},
		{name: "flag even if missing", flag: "missing.yaml", wantPath: "missing.yaml", wantExplicit: true},
		{name: "env next", env: ptr("b.yaml"), createDefault: true, wantPath: "b.yaml", wantExplicit: true},
		{name: "empty env is unset", env: ptr(""), createDefault: true, wantPath: DefaultPath},
		{name: "parley.yaml in the working directory", createDefault: true, wantPath: DefaultPath},
		{name: "nothing", wantPath: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			setConfigEnv(t, tc.env)
			if tc.createDefault {
				writeFile(t, DefaultPath, "log:\n  level: debug\n")
			}
			path, explicit := Find(tc.flag)
			if path != tc.wantPath || explicit != tc.wantExplicit {
				t.Errorf("Find(%q) = %q, %v; want %q, %v", tc.flag, path, explicit, tc.wantPath, tc.wantExplicit)
			}
		})
	}
}

func TestLoadOrDefault(t *testing.T) {
	t.Run("no file gives the defaults", func(t *testing.T) {
		t.Chdir(t.TempDir())
		setConfigEnv(t, nil)
		c, path, err := LoadOrDefault("")
		if err != nil || path != "" || !reflect.DeepEqual(c, Default()) {
			t.Errorf("LoadOrDefault() = %+v, %q, %v; want defaults, \"\", nil", c, path, err)
		}
	})
	t.Run("parley.yaml in the working directory", func(t *testing.T) {
		t.Chdir(t.TempDir())
		setConfigEnv(t, nil)
		writeFile(t, DefaultPath, "log:\n  level: debug\n")
		c, path, err := LoadOrDefault("")
		if err != nil || path != DefaultPath || c.Log.Level != "debug" {
			t.Errorf("LoadOrDefault() = %+v, %q, %v", c, path, err)
		}
	})
	t.Run("file named by the flag", func(t *testing.T) {
		dir := t.TempDir()
		setConfigEnv(t, nil)
		file := filepath.Join(dir, "custom.yaml")
		writeFile(t, file, "log:\n  format: ${PARLEY_TEST_FORMAT}\n")
		t.Setenv("PARLEY_TEST_FORMAT", "json")
		c, path, err := LoadOrDefault(file)
		if err != nil || path != file || c.Log.Format != "json" {
			t.Errorf("LoadOrDefault(%q) = %+v, %q, %v", file, c, path, err)
		}
	})
	t.Run("problems name the file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "bad.yaml")
		setConfigEnv(t, nil)
		writeFile(t, file, "log:\n  levle: debug\n")
		_, _, err := LoadOrDefault(file)
		ps := problemsOf(t, err)
		if len(ps) != 1 || ps[0].File != file || ps[0].Line != 2 {
			t.Errorf("problems = %#v, want one at %s:2", ps, file)
		}
	})

	missing := []struct {
		name     string
		flag     string
		env      *string
		wantText []string
	}{
		{name: "missing file named by the flag", flag: "nope.yaml",
			wantText: []string{`"nope.yaml"`, "named on the command line", "does not exist", "cp config.example.yaml nope.yaml"}},
		{name: "missing file named by PARLEY_CONFIG", env: ptr("env.yaml"),
			wantText: []string{`"env.yaml"`, "$PARLEY_CONFIG", "does not exist", "cp config.example.yaml env.yaml"}},
	}
	for _, tc := range missing {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			setConfigEnv(t, tc.env)
			writeFile(t, DefaultPath, "") // must not be used as a fallback
			c, _, err := LoadOrDefault(tc.flag)
			if err == nil {
				t.Fatalf("LoadOrDefault(%q) = %+v, want an error", tc.flag, c)
			}
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %v is not fs.ErrNotExist", err)
			}
			for _, s := range tc.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestLoadReadError(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "read config: ") {
		t.Errorf("Load(missing) error = %v, want a wrapped fs.ErrNotExist", err)
	}
}

func ptr[T any](v T) *T { return &v }

func setConfigEnv(t *testing.T, v *string) {
	t.Helper()
	t.Setenv(EnvConfigPath, "") // restores the old value when the test ends
	if v == nil {
		if err := os.Unsetenv(EnvConfigPath); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Setenv(EnvConfigPath, *v)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
