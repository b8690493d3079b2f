package config

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // the only problem, as Problem.Error prints it; "" for none
	}{
		{"sqlite path", "database:\n  url: file:data/x.db\n", ""},
		{"postgres url", "database:\n  url: postgresql://u:p@h:5432/db?sslmode=disable\n", ""},
		{"empty sqlite path", "database:\n  url: 'sqlite:'\n",
			`parley.yaml:2: database.url: has no file path; use a postgres://user:password@host:5432/dbname URL or a SQLite file path such as data/parley.db`},
		{"bad postgres url", "database:\n  url: postgres://u:p@h:port/db\n",
			`parley.yaml:2: database.url: not a valid PostgreSQL URL: invalid port; use postgres://user:password@host:5432/dbname, with special characters in the password %-escaped`},
		{"synchronous normal", "database:\n  sqlite:\n    synchronous: NORMAL\n", ""},
		{"synchronous", "database:\n  sqlite:\n    synchronous: off\n",
			`parley.yaml:3: database.sqlite.synchronous: "off" is not allowed; use "full" (an acknowledged message survives power loss) or "normal" (faster, but the last commits can be lost on power loss)`},
		{"busy_timeout zero", "database:\n  sqlite:\n    busy_timeout: 0s\n",
			`parley.yaml:3: database.sqlite.busy_timeout: 0s is not allowed; use a duration above 0 such as "5s"`},
		{"busy_timeout negative", "database:\n  sqlite:\n    busy_timeout: -1s\n",
			`parley.yaml:3: database.sqlite.busy_timeout: -1s is not allowed; use a duration above 0 such as "5s"`},
		{"max_conns zero is not the default", "database:\n  postgres:\n    max_conns: 0\n",
			`parley.yaml:3: database.postgres.max_conns: 0 is out of range; use 1-1000`},
		{"max_conns too big", "database:\n  postgres:\n    max_conns: 1001\n",
			`parley.yaml:3: database.postgres.max_conns: 1001 is out of range; use 1-1000`},
		{"listen any interface", "http:\n  listen: ':0'\n", ""},
		{"listen ipv6", "http:\n  listen: '[::1]:65535'\n", ""},
		{"listen without port", "http:\n  listen: localhost\n",
			`parley.yaml:2: http.listen: "localhost" is not host:port; use host:port such as "127.0.0.1:8080", "[::1]:8080" or ":8080"`},
		{"listen port too big", "http:\n  listen: ':65536'\n",
			`parley.yaml:2: http.listen: port "65536" is not a number from 0 to 65535; use host:port such as "127.0.0.1:8080", "[::1]:8080" or ":8080"`},
		{"listen port name", "http:\n  listen: 'localhost:http'\n",
			`parley.yaml:2: http.listen: port "http" is not a number from 0 to 65535; use host:port such as "127.0.0.1:8080", "[::1]:8080" or ":8080"`},
		{"log level is case-insensitive", "log:\n  level: WARN\n", ""},
		{"log level", "log:\n  level: verbose\n",
			`parley.yaml:2: log.level: "verbose" is not a log level; use debug, info, warn or error`},
		{"log format", "log:\n  format: xml\n",
			`parley.yaml:2: log.format: "xml" is not a log format; use text or json`},
		{"agent id required", "agents:\n  - model: echo\n",
			`parley.yaml:2: agents[0].id: required; use 1-64 characters from a-z, 0-9, "_" and "-", starting with a letter or digit`},
		{"agent id required when empty", "agents:\n  - id: ''\n",
			`parley.yaml:2: agents[0].id: required; use 1-64 characters from a-z, 0-9, "_" and "-", starting with a letter or digit`},
		{"agent id shape", "agents:\n  - id: Family Chat\n",
			`parley.yaml:2: agents[0].id: "Family Chat" is not a valid agent id; use 1-64 characters from a-z, 0-9, "_" and "-", starting with a letter or digit`},
		{"agent id starts with a dash", "agents:\n  - id: -x\n",
			`parley.yaml:2: agents[0].id: "-x" is not a valid agent id; use 1-64 characters from a-z, 0-9, "_" and "-", starting with a letter or digit`},
		{"agent id too long", "agents:\n  - id: " + strings.Repeat("a", 65) + "\n",
			`parley.yaml:2: agents[0].id: "` + strings.Repeat("a", 65) + `" is not a valid agent id; use 1-64 characters from a-z, 0-9, "_" and "-", starting with a letter or digit`},
		{"agent id 64 long", "agents:\n  - id: " + strings.Repeat("a", 64) + "\n", ""},
		{"agent ids unique", "agents:\n  - id: x\n  - id: y\n  - id: x\n",
			`parley.yaml:4: agents[2].id: "x" is used by agents[0] too; agent ids must be unique`},
		{"provider model", "agents:\n  - id: a\n    model: anthropic/claude-sonnet-4-5\n", ""},
		{"model without name", "agents:\n  - id: a\n    model: openai/\n",
			`parley.yaml:3: agents[0].model: "openai/" is not a model; use "echo" (offline) or "provider/model" such as "openai/gpt-4o-mini"`},
		{"max_context_tokens", "agents:\n  - id: a\n    max_context_tokens: 1023\n",
			`parley.yaml:3: agents[0].max_context_tokens: 1023 is too small; use 1024 or more`},
		{"max_context_tokens zero is not the default", "agents:\n  - id: a\n    max_context_tokens: 0\n",
			`parley.yaml:3: agents[0].max_context_tokens: 0 is too small; use 1024 or more`},
		{"idle_timeout_minutes", "agents:\n  - id: a\n    idle_timeout_minutes: -5\n",
			`parley.yaml:3: agents[0].idle_timeout_minutes: -5 is negative; use a number of minutes, or 0 to turn the idle reset off`},
		{"daily_reset_hour off", "agents:\n  - id: a\n    daily_reset_hour: -1\n", ""},
		{"daily_reset_hour midnight", "agents:\n  - id: a\n    daily_reset_hour: 0\n", ""},
		{"daily_reset_hour too big", "agents:\n  - id: a\n  - id: b\n    daily_reset_hour: 24\n",
			`parley.yaml:4: agents[1].daily_reset_hour: 24 is out of range; use 0-23, or -1 to turn the daily reset off`},
		{"daily_reset_hour too small", "agents:\n  - id: a\n    daily_reset_hour: -2\n",
			`parley.yaml:3: agents[0].daily_reset_hour: -2 is out of range; use 0-23, or -1 to turn the daily reset off`},
		{"timezone", "agents:\n  - id: a\n    timezone: Mars/Olympus\n",
			`parley.yaml:3: agents[0].timezone: unknown time zone "Mars/Olympus"; use an IANA name such as "Europe/Berlin" or "UTC"`},
		{"history", "agents:\n  - id: a\n    history:\n      cron: 0\n",
			`parley.yaml:4: agents[0].history.cron: 0 is too small; keep at least 1 turn`},
		{"history negative", "agents:\n  - id: a\n    history:\n      api: -3\n",
			`parley.yaml:4: agents[0].history.api: -3 is too small; keep at least 1 turn`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Parse: unexpected problems:\n%v", err)
				}
				return
			}
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].Error() != tc.want {
				t.Errorf("problems:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

func TestValidateLocatesMissingKeys(t *testing.T) {
	// A problem with a key that is not in the file points at its parent.
	src := "log:\n  level: info\nagents:\n  - id: a\n    history:\n      cli: 0\n"
	_, err := Parse([]byte(src), testFile, nil)
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Line != 6 || ps[0].Key != "agents[0].history.cli" {
		t.Errorf("problems = %#v, want agents[0].history.cli at line 6", ps)
	}
}

func TestProblemError(t *testing.T) {
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{"everything", Problem{File: "a.yaml", Line: 3, Key: "log.level", Message: "bad"}, "a.yaml:3: log.level: bad"},
		{"no line", Problem{File: "a.yaml", Key: "agents[0].id", Message: "bad"}, "a.yaml: agents[0].id: bad"},
		{"no file", Problem{Line: 3, Key: "log.level", Message: "bad"}, "line 3: log.level: bad"},
		{"key only", Problem{Key: "log.level", Message: "bad"}, "log.level: bad"},
		{"no key", Problem{File: "a.yaml", Line: 1, Message: "bad"}, "a.yaml:1: bad"},
		{"message quotes the key", Problem{File: "a.yaml", Line: 1, Key: "x", Message: `unknown key "x"`}, `a.yaml:1: unknown key "x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}
