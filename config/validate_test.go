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
		{"memory builtin", "memory:\n  index: BUILTIN\n", ""},
		{"memory typesense", "memory:\n  index: typesense\n  typesense:\n    url: http://127.0.0.1:8108\n    api_key: k\n", ""},
		{"memory index", "memory:\n  index: elastic\n",
			`parley.yaml:2: memory.index: "elastic" is not allowed; use "builtin" (full-text search in the database) or "typesense"`},
		{"typesense without url", "memory:\n  index: typesense\n  typesense:\n    api_key: k\n",
			`parley.yaml:3: memory.typesense.url: required when memory.index is "typesense"; use the server's address, such as "http://127.0.0.1:8108"`},
		{"typesense bad url", "memory:\n  index: typesense\n  typesense:\n    url: 127.0.0.1:8108\n    api_key: k\n",
			`parley.yaml:4: memory.typesense.url: "127.0.0.1:8108" is not an http(s) URL; use the server's address, such as "http://127.0.0.1:8108"`},
		{"typesense without key", "memory:\n  index: typesense\n  typesense:\n    url: http://ts:8108\n",
			`parley.yaml:3: memory.typesense.api_key: required when memory.index is "typesense"; set it from the environment, such as "${TYPESENSE_API_KEY}"`},
		{"compaction threshold", "agents:\n  - id: a\n    compaction:\n      threshold: 0.99\n",
			`parley.yaml:4: agents[0].compaction.threshold: 0.99 is out of range; use a share of max_context_tokens from 0.1 to 0.95, such as 0.7`},
		{"compaction threshold zero is not the default", "agents:\n  - id: a\n    compaction:\n      threshold: 0\n",
			`parley.yaml:4: agents[0].compaction.threshold: 0 is out of range; use a share of max_context_tokens from 0.1 to 0.95, such as 0.7`},
		{"compaction model", "agents:\n  - id: a\n    compaction:\n      model: openai/gpt-4o-mini\n", ""},
		{"compaction by turns", "agents:\n  - id: a\n    compaction:\n      tail_turns: 4\n      tail_budget_pct: 50\n      summary_max_tokens: 2048\n      reserve_tokens: 8000\n      retries: 0\n      flush_timeout: 30s\n      summary_timeout: 1m\n", ""},
		{"tail_turns zero", "agents:\n  - id: a\n    compaction:\n      tail_turns: 0\n",
			`parley.yaml:4: agents[0].compaction.tail_turns: 0 is out of range; keep 1-100 of the latest turns, such as 2`},
		{"tail_budget_pct", "agents:\n  - id: a\n    compaction:\n      tail_budget_pct: 95\n",
			`parley.yaml:4: agents[0].compaction.tail_budget_pct: 95 is out of range; use a percentage of the usable window from 5 to 90, such as 30`},
		{"reserve_tokens past half the window", "agents:\n  - id: a\n    max_context_tokens: 8000\n    max_output_tokens: 1000\n    compaction:\n      reserve_tokens: 5000\n",
			`parley.yaml:6: agents[0].compaction.reserve_tokens: 5000 is out of range; use 0 (min(20000, max_output_tokens)) up to half of max_context_tokens (4000)`},
		{"summary_timeout zero", "agents:\n  - id: a\n    compaction:\n      summary_timeout: 0s\n",
			`parley.yaml:4: agents[0].compaction.summary_timeout: 0s is not allowed; the summary needs a deadline, such as "3m"`},
		{"agent timeouts", "agents:\n  - id: a\n    timeouts:\n      first_byte: 10m\n", ""},
		{"agent timeout negative", "agents:\n  - id: a\n    timeouts:\n      idle: -1s\n",
			`parley.yaml:4: agents[0].timeouts.idle: -1s is negative; use a duration such as "5m", or 0s to keep the provider's`},
		{"provider timeouts", "providers:\n  openai:\n    base_url: http://localhost:11434/v1\n    timeouts:\n      first_byte: 5m\n", ""},
		{"provider timeout zero", "providers:\n  openai:\n    base_url: http://localhost:11434/v1\n    timeouts:\n      total: 0s\n",
			`parley.yaml:5: providers.openai.timeouts.total: 0s is not allowed: every model call needs a deadline; use a duration above 0 such as "2m"`},
		{"subagents", "agents:\n  - id: a\n    subagents: [b]\n  - id: b\n", ""},
		{"subagent unknown", "agents:\n  - id: a\n    subagents: [nobody]\n",
			`parley.yaml:3: agents[0].subagents[0]: "nobody" is not an agent; use the id of one of the agents: a`},
		{"subagent itself", "agents:\n  - id: a\n    subagents: [a]\n",
			`parley.yaml:3: agents[0].subagents[0]: "a" is this agent; an agent may always hand tasks to itself, so leave it out`},
		{"subagent twice", "agents:\n  - id: a\n    subagents: [b, b]\n  - id: b\n",
			`parley.yaml:3: agents[0].subagents[1]: "b" is listed as subagents[0] too; list each agent once`},
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
		{"history cache below 0", "database:\n  history_cache_mb: -1\n",
			`parley.yaml:2: database.history_cache_mb: -1 is out of range; use 0-4096 (0 keeps no history in memory)`},
		{"history cache too big", "database:\n  history_cache_mb: 5000\n",
			`parley.yaml:2: database.history_cache_mb: 5000 is out of range; use 0-4096 (0 keeps no history in memory)`},
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
			`parley.yaml:3: agents[0].model: "openai/" is not a model; use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`},
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
		{"history omit_tool_results", "agents:\n  - id: a\n    history:\n      omit_tool_results: [web_fetch, \"files__*\"]\n", ""},
		{"history omit_tool_results bad pattern", "agents:\n  - id: a\n    history:\n      omit_tool_results: [\"mcp:\"]\n",
			`parley.yaml:4: agents[0].history.omit_tool_results[0]: "mcp:": write mcp:<server> or mcp:<server>/<tool>; name a tool such as web_fetch, a pattern such as "files__*", or mcp:<server>`},
		{"model openai", "agents:\n  - id: a\n    model: openai/gpt-4o-mini\n", ""},
		{"model with a slash in the name", "agents:\n  - id: a\n    model: openai/meta-llama/Llama-3-8b\n", ""},
		{"model unknown provider", "agents:\n  - id: a\n    model: gemini/gemini-2.0\n",
			`parley.yaml:3: agents[0].model: "gemini/gemini-2.0" is not a model: unknown provider "gemini"; use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`},
		{"model without provider", "agents:\n  - id: a\n    model: gpt-4o\n",
			`parley.yaml:3: agents[0].model: "gpt-4o" is not a model; use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`},
		{"model echo with a name", "agents:\n  - id: a\n    model: echo/x\n",
			`parley.yaml:3: agents[0].model: "echo/x" is not a model; use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`},
		{"model anthropic without name", "agents:\n  - id: a\n    model: anthropic/\n",
			`parley.yaml:3: agents[0].model: "anthropic/" is not a model; use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`},
		{"model without provider name", "agents:\n  - id: a\n    model: /gpt-4o\n",
			`parley.yaml:3: agents[0].model: "/gpt-4o" is not a model; use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`},
		{"model with a space", "agents:\n  - id: a\n    model: openai/gpt 4o\n",
			`parley.yaml:3: agents[0].model: "openai/gpt 4o" is not a model; use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`},
		{"model provider is case-sensitive", "agents:\n  - id: a\n    model: OpenAI/gpt-4o\n",
			`parley.yaml:3: agents[0].model: "OpenAI/gpt-4o" is not a model: unknown provider "OpenAI"; use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`},
		{"max_steps bounds", "agents:\n  - id: a\n    max_steps: 1\n  - id: b\n    max_steps: 100\n", ""},
		{"max_steps zero is not the default", "agents:\n  - id: a\n    max_steps: 0\n",
			`parley.yaml:3: agents[0].max_steps: 0 is out of range; use 1-100`},
		{"max_steps too big", "agents:\n  - id: a\n    max_steps: 101\n",
			`parley.yaml:3: agents[0].max_steps: 101 is out of range; use 1-100`},
		{"max_output_tokens bounds", "agents:\n  - id: a\n    max_output_tokens: 1\n  - id: b\n    max_output_tokens: 200000\n    max_context_tokens: 400000\n", ""},
		{"max_output_tokens past half the window", "agents:\n  - id: a\n    max_context_tokens: 8192\n    max_output_tokens: 4097\n",
			`parley.yaml:4: agents[0].max_output_tokens: 4097 is more than half of max_context_tokens (8192); a reply must leave room for the conversation, so use at most 4096 or raise max_context_tokens`},
		{"max_output_tokens zero is not the default", "agents:\n  - id: a\n    max_output_tokens: 0\n",
			`parley.yaml:3: agents[0].max_output_tokens: 0 is out of range; use 1-200000`},
		{"max_output_tokens too big", "agents:\n  - id: a\n    max_output_tokens: 200001\n    max_context_tokens: 1000000\n",
			`parley.yaml:3: agents[0].max_output_tokens: 200001 is out of range; use 1-200000`},
		{"queue_mode values", "agents:\n  - id: a\n    queue_mode: collect\n  - id: b\n    queue_mode: Steer\n  - id: c\n    queue_mode: interrupt\n", ""},
		{"queue_mode", "agents:\n  - id: a\n    queue_mode: queue\n",
			`parley.yaml:3: agents[0].queue_mode: "queue" is not a queue mode; use followup, collect, steer or interrupt`},
		{"tools", "agents:\n  - id: a\n    tools: [web_search, read_file]\n", ""},
		{"tool name empty", "agents:\n  - id: a\n    tools:\n      - web_search\n      - ''\n",
			`parley.yaml:5: agents[0].tools[1]: "" is not a tool name; use the tool's name without spaces, such as "memory_search"`},
		{"tool name with a space", "agents:\n  - id: a\n    tools:\n      - web search\n",
			`parley.yaml:4: agents[0].tools[0]: "web search" is not a tool name; use the tool's name without spaces, such as "memory_search"`},
		{"tool listed twice", "agents:\n  - id: a\n    tools:\n      - web_search\n      - ' web_search'\n",
			`parley.yaml:5: agents[0].tools[1]: "web_search" is listed as tools[0] too; list each tool once`},
		{"providers", "providers:\n  openai:\n    api_key: sk-abc\n    base_url: https://openrouter.ai/api/v1\n" +
			"  anthropic:\n    base_url: http://localhost:8081\n", ""},
		{"base_url scheme", "providers:\n  openai:\n    base_url: localhost:11434/v1\n",
			`parley.yaml:3: providers.openai.base_url: "localhost:11434/v1" is not an http:// or https:// URL; use one such as "http://localhost:11434/v1" (Ollama) or "https://openrouter.ai/api/v1", or leave it empty for the provider's own API`},
		{"base_url without host", "providers:\n  anthropic:\n    base_url: https:///v1\n",
			`parley.yaml:3: providers.anthropic.base_url: "https:///v1" is not an http:// or https:// URL; use one such as "http://localhost:11434/v1" (Ollama) or "https://openrouter.ai/api/v1", or leave it empty for the provider's own API`},
		{"base_url password is hidden", "providers:\n  openai:\n    base_url: ftp://u:pw@host/v1\n",
			`parley.yaml:3: providers.openai.base_url: "ftp://u:[redacted]@host/v1" is not an http:// or https:// URL; use one such as "http://localhost:11434/v1" (Ollama) or "https://openrouter.ai/api/v1", or leave it empty for the provider's own API`},
		{"api_key with a space", "providers:\n  anthropic:\n    api_key: 'sk-ant abc'\n",
			`parley.yaml:3: providers.anthropic.api_key: contains spaces or line breaks; an API key is a single word, e.g. ${OPENAI_API_KEY}`},
		{"recovery mark", "gateway:\n  recovery: MARK\n", ""},
		{"recovery", "gateway:\n  recovery: skip\n",
			`parley.yaml:2: gateway.recovery: "skip" is not allowed; use "rerun" (answer messages left unanswered by a crash) or "mark" (mark them failed without answering)`},
		{"queue_cap bounds", "gateway:\n  queue_cap: 1000\n", ""},
		{"queue_cap zero is not the default", "gateway:\n  queue_cap: 0\n",
			`parley.yaml:2: gateway.queue_cap: 0 is out of range; use 1-1000`},
		{"queue_cap too big", "gateway:\n  queue_cap: 1001\n",
			`parley.yaml:2: gateway.queue_cap: 1001 is out of range; use 1-1000`},
		{"debounce off", "gateway:\n  debounce: 0s\n", ""},
		{"debounce most", "gateway:\n  debounce: 10s\n", ""},
		{"debounce too long", "gateway:\n  debounce: 10.001s\n",
			`parley.yaml:2: gateway.debounce: 10.001s is out of range; use a duration from 0 (off) to 10s, such as "500ms"`},
		{"debounce negative", "gateway:\n  debounce: -1ms\n",
			`parley.yaml:2: gateway.debounce: -1ms is out of range; use a duration from 0 (off) to 10s, such as "500ms"`},
		{"shutdown_timeout zero", "gateway:\n  shutdown_timeout: 0s\n",
			`parley.yaml:2: gateway.shutdown_timeout: 0s is not allowed; use a duration above 0 such as "30s"`},
		{"shutdown_timeout negative", "gateway:\n  shutdown_timeout: -5s\n",
			`parley.yaml:2: gateway.shutdown_timeout: -5s is not allowed; use a duration above 0 such as "30s"`},
		{"bindings", "agents:\n  - id: a\n  - id: b\nbindings:\n  - agent: b\n    user: u1\n  - agent: a\n    adapter: tg\n    chat: c1\n", ""},
		{"binding agent required", "agents:\n  - id: a\n  - id: b\nbindings:\n  - user: u1\n",
			`parley.yaml:5: bindings[0].agent: required; use the id of one of the agents: a, b`},
		{"binding agent unknown", "bindings:\n  - agent: family\n    chat: c1\n",
			`parley.yaml:2: bindings[0].agent: "family" is not an agent; use the id of one of the agents: default`},
		{"binding matches everything", "bindings:\n  - agent: default\n    chat: c1\n  - agent: default\n    chat: ''\n",
			`parley.yaml:4: bindings[1]: sets none of adapter, chat and user, so it matches everything; put that agent first in agents instead, or name the adapter, chat or user it is for`},
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

// Fallback models, a reasoning effort and a provider's concurrency cap are
// checked like the rest.
func TestProviderFeatureKeys(t *testing.T) {
	c, err := Parse([]byte("providers:\n  openai:\n    api_key: sk-x\n    max_concurrent: 4\nagents:\n  - id: default\n    model: openai/gpt-4o\n    fallback_models: [\"anthropic/claude-haiku-4-5\", \"echo\"]\n    reasoning_effort: High\n"), "parley.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Providers["openai"].MaxConcurrent != 4 || len(c.Agents[0].FallbackModels) != 2 || c.Agents[0].ReasoningEffort != "high" {
		t.Fatalf("parsed %+v %+v", c.Providers["openai"], c.Agents[0])
	}
	_, err = Parse([]byte("providers:\n  openai:\n    max_concurrent: -1\nagents:\n  - id: default\n    fallback_models: [\"gpt-4o\"]\n    reasoning_effort: extreme\n"), "parley.yaml", nil)
	for _, want := range []string{"providers.openai.max_concurrent: -1 is out of range", `agents[0].fallback_models[0]: "gpt-4o" is not a model`, `agents[0].reasoning_effort: "extreme" is not an effort`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v; want %q", err, want)
		}
	}
}

// An agent's models allowlist is checked like its model, and the agent's
// own model always leads what it allows.
func TestAgentModelsAllowlist(t *testing.T) {
	c, err := Parse([]byte("providers:\n  openai:\n    api_key: sk-x\nagents:\n  - id: default\n    model: openai/gpt-4o\n    models: [\" openai/gpt-4o-mini \", \"openai/gpt-4o\", \"echo\"]\n"), "parley.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Agents[0].AllowedModels(), ","); got != "openai/gpt-4o,openai/gpt-4o-mini,echo" {
		t.Fatalf("allowed %s", got)
	}
	_, err = Parse([]byte("agents:\n  - id: default\n    models: [\"gpt-4o\", \"nope/x\"]\n"), "parley.yaml", nil)
	for _, want := range []string{`agents[0].models[0]: "gpt-4o" is not a model`, `agents[0].models[1]: "nope/x" is not a model`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v; want %q", err, want)
		}
	}
}
