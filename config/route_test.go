package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
)

func TestRoute(t *testing.T) {
	c := &Config{
		Agents: []Agent{{ID: "main"}, {ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}},
		Bindings: []Binding{
			{Agent: "a", Adapter: "tg"},
			{Agent: "b", Chat: "c1"},
			{Agent: "c", User: "u1"},
			{Agent: "d", Adapter: "tg"},             // ties with the first: loses
			{Agent: "d", Adapter: "dc", Chat: "c1"}, // more specific than chat alone
			{Agent: "a", Chat: "c2", User: "u2"},
			{Agent: "b", User: "u2"},                // less specific than chat+user
			{Agent: "c", Adapter: "tg", Chat: "c3"}, // chat+adapter
			{Agent: "d", Chat: "c3"},                // chat alone
			{Agent: "d", User: "u3"},                // user beats chat+adapter
		},
	}
	tests := []struct {
		name                string
		adapter, chat, user string
		want                string
	}{
		{"no match goes to the first agent", "cli", "x", "y", "main"},
		{"adapter", "tg", "x", "y", "a"},
		{"adapter tie goes to the first listed", "tg", "", "", "a"},
		{"chat beats adapter", "tg", "c1", "y", "b"},
		{"user beats chat", "tg", "c1", "u1", "c"},
		{"user anywhere", "cli", "", "u1", "c"},
		{"chat and adapter beat chat", "dc", "c1", "y", "d"},
		{"chat and user beat user", "tg", "c2", "u2", "a"},
		{"user alone elsewhere", "tg", "c9", "u2", "b"},
		{"chat and adapter beat chat alone", "tg", "c3", "y", "c"},
		{"chat alone on another adapter", "dc", "c3", "y", "d"},
		{"user beats chat and adapter", "tg", "c3", "u3", "d"},
		{"ids are matched exactly", "TG", "C1", "U1", "main"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Route(tc.adapter, tc.chat, tc.user); got != tc.want {
				t.Errorf("Route(%q, %q, %q) = %q, want %q", tc.adapter, tc.chat, tc.user, got, tc.want)
			}
		})
	}
	t.Run("tie between equally specific bindings", func(t *testing.T) {
		c := &Config{Agents: []Agent{{ID: "main"}}, Bindings: []Binding{
			{Agent: "first", Chat: "c", User: "u"},
			{Agent: "second", Adapter: "tg", User: "u"},
			{Agent: "third", Chat: "c", User: "u"},
		}}
		// chat+user outranks adapter+user, so "first" wins over "second";
		// "third" ties with "first" and loses for being listed later.
		if got := c.Route("tg", "c", "u"); got != "first" {
			t.Errorf("Route = %q, want first", got)
		}
	})
	t.Run("no agents", func(t *testing.T) {
		if got := (&Config{}).Route("tg", "c", "u"); got != "" {
			t.Errorf("Route on an empty Config = %q, want \"\"", got)
		}
	})
	t.Run("parsed", func(t *testing.T) {
		c := mustParse(t, "agents:\n  - id: main\n  - id: fam\nbindings:\n  - agent: ' fam '\n    chat: ' c1 '\n", nil)
		if got := c.Route("tg", "c1", "u"); got != "fam" {
			t.Errorf("Route = %q, want fam (values are trimmed)", got)
		}
		if got := c.Route("tg", "c2", "u"); got != "main" {
			t.Errorf("Route = %q, want main", got)
		}
	})
}

func TestMissingKeys(t *testing.T) {
	const agents = "agents:\n  - id: e\n  - id: o\n    model: openai/gpt-4o-mini\n  - id: a\n    model: anthropic/claude-sonnet-4-5\n  - id: o2\n    model: openai/llama3\n"
	tests := []struct {
		name      string
		providers string
		vars      map[string]string
		want      []string
	}{
		{"none configured", "", nil, []string{"o", "a", "o2"}},
		{"openai key", "providers:\n  openai:\n    api_key: ${OPENAI_API_KEY}\n", map[string]string{"OPENAI_API_KEY": "sk-x"}, []string{"a"}},
		{"openai key unset", "providers:\n  openai:\n    api_key: ${OPENAI_API_KEY:-}\n", nil, []string{"o", "a", "o2"}},
		{"openai base url only", "providers:\n  openai:\n    base_url: http://localhost:11434/v1\n", nil, []string{"a"}},
		{"anthropic key", "providers:\n  anthropic:\n    api_key: sk-ant\n", nil, []string{"o", "o2"}},
		{"blank key is no key", "providers:\n  anthropic:\n    api_key: '  '\n", nil, []string{"o", "a", "o2"}},
		{"both", "providers:\n  openai:\n    api_key: k\n  anthropic:\n    base_url: https://proxy.example.com\n", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, agents+tc.providers, tc.vars)
			if got := c.MissingKeys(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MissingKeys() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestProviderHelpers(t *testing.T) {
	ps := llm.ProvidersConfig{"openai": llm.ProviderConfig{APIKey: "k"}, "anthropic": llm.ProviderConfig{BaseURL: "http://x"}}
	tests := []struct {
		name       string
		want       llm.ProviderConfig
		ok         bool
		configured bool
	}{
		{"openai", ps["openai"], true, true},
		{"anthropic", ps["anthropic"], true, true},
		{"echo", llm.ProviderConfig{}, false, false},
		{"OpenAI", llm.ProviderConfig{}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := ps.Lookup(tc.name)
			if p != tc.want || ok != tc.ok || p.Configured() != tc.configured {
				t.Errorf("Lookup(%q) = %+v, %v (configured %v); want %+v, %v (configured %v)",
					tc.name, p, ok, p.Configured(), tc.want, tc.ok, tc.configured)
			}
		})
	}
}

func TestNewDefaultsAndExplicitValues(t *testing.T) {
	tests := []struct {
		name string
		src  string
		got  func(*Config) any
		want any
	}{
		{"debounce absent", "gateway: {}\n", func(c *Config) any { return c.Gateway.Debounce.Std() }, 500 * time.Millisecond},
		{"debounce explicit 0 stays 0", "gateway:\n  debounce: 0s\n", func(c *Config) any { return c.Gateway.Debounce.Std() }, time.Duration(0)},
		{"debounce null is the default", "gateway:\n  debounce:\n", func(c *Config) any { return c.Gateway.Debounce.Std() }, 500 * time.Millisecond},
		{"shutdown_timeout", "gateway:\n  shutdown_timeout: 2m\n", func(c *Config) any { return c.Gateway.ShutdownTimeout.Std() }, 2 * time.Minute},
		{"queue_cap", "gateway:\n  queue_cap: 5\n", func(c *Config) any { return c.Gateway.QueueCap }, 5},
		{"recovery lowercased", "gateway:\n  recovery: ' Mark '\n", func(c *Config) any { return c.Gateway.Recovery }, "mark"},
		{"blank prompt is the default", "agents:\n  - id: a\n    prompt: '  '\n", func(c *Config) any { return c.Agents[0].Prompt }, DefaultPrompt},
		{"multi-line prompt kept", "agents:\n  - id: a\n    prompt: |\n      Be brief.\n      Be kind.\n", func(c *Config) any { return c.Agents[0].Prompt }, "Be brief.\nBe kind.\n"},
		{"workspace trimmed", "agents:\n  - id: a\n    workspace: ' /srv/ws '\n", func(c *Config) any { return c.Agents[0].Workspace }, "/srv/ws"},
		{"empty tools is none", "agents:\n  - id: a\n    tools: []\n", func(c *Config) any { return c.Agents[0].Tools }, []string(nil)},
		{"tools trimmed", "agents:\n  - id: a\n    tools: [' a ', b]\n", func(c *Config) any { return c.Agents[0].Tools }, []string{"a", "b"}},
		{"queue_mode lowercased", "agents:\n  - id: a\n    queue_mode: COLLECT\n", func(c *Config) any { return c.Agents[0].QueueMode }, "collect"},
		{"base_url trimmed", "providers:\n  openai:\n    base_url: ' http://h/v1 '\n", func(c *Config) any { return c.Providers["openai"].BaseURL }, "http://h/v1"},
		{"api_key trimmed", "providers:\n  openai:\n    api_key: \"${K}\\n\"\n", func(c *Config) any { return c.Providers["openai"].APIKey.Reveal() }, "sk-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.src, map[string]string{"K": "sk-1"})
			if got := tc.got(c); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestNewKeysReportWrongTypes(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"tools not a list", "agents:\n  - id: a\n    tools: web_search\n", `parley.yaml:3: agents[0].tools: expected a list, got "web_search"`},
		{"bindings not a list", "bindings:\n  agent: a\n", `parley.yaml:2: bindings: expected a list, got a mapping`},
		{"unknown binding key", "bindings:\n  - agent: default\n    chat: c\n    channel: c\n",
			`parley.yaml:4: unknown key "bindings[0].channel" (known keys: agent, adapter, chat, user, workspace, harness)`},
		{"unknown provider", "providers:\n  gemini:\n    api_key: x\n",
			`parley.yaml:2: providers.gemini: "gemini" is not a provider parley knows; use one of anthropic, openai`},
		{"api_key not shown", "providers:\n  openai:\n    api_key: [sk-" + password + "]\n",
			`parley.yaml:3: providers.openai.api_key: expected a string, got a list`},
		{"debounce", "gateway:\n  debounce: 500\n", `parley.yaml:2: gateway.debounce: expected a duration such as "5s" or "1m30s", got "500"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, nil)
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].Error() != tc.want {
				t.Errorf("problems:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

func TestAPIKeysRedacted(t *testing.T) {
	const openaiKey, anthropicKey = "sk-openai-" + password, "sk-ant-" + password
	c := mustParse(t, "providers:\n  openai:\n    api_key: ${OPENAI_API_KEY}\n  anthropic:\n    api_key: ${ANTHROPIC_API_KEY}\n",
		map[string]string{"OPENAI_API_KEY": openaiKey, "ANTHROPIC_API_KEY": anthropicKey})
	if c.Providers["openai"].APIKey.Reveal() != openaiKey || c.Providers["anthropic"].APIKey.Reveal() != anthropicKey {
		t.Fatalf("keys not loaded: %q, %q", c.Providers["openai"].APIKey.Reveal(), c.Providers["anthropic"].APIKey.Reveal())
	}

	outputs := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		outputs["fmt "+verb+" config"] = fmt.Sprintf(verb, c)
		outputs["fmt "+verb+" providers"] = fmt.Sprintf(verb, c.Providers)
		outputs["fmt "+verb+" provider"] = fmt.Sprintf(verb, c.Providers["openai"])
		anthropic := c.Providers["anthropic"]
		outputs["fmt "+verb+" provider pointer"] = fmt.Sprintf(verb, &anthropic)
	}
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var buf bytes.Buffer
		slog.New(h(&buf)).Info("loaded", "config", c, "providers", c.Providers, "openai", c.Providers["openai"],
			"key", c.Providers["anthropic"].APIKey)
		outputs["slog "+name] = buf.String()
	}
	for name, v := range map[string]any{"config": c, "providers": c.Providers, "provider": c.Providers["openai"]} {
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outputs["json "+name] = string(out)
	}

	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(out, password) {
				t.Fatalf("leaks an API key:\n%s", out)
			}
			if !strings.Contains(out, Redacted) {
				t.Errorf("does not show %s:\n%s", Redacted, out)
			}
		})
	}
	t.Run("json shape", func(t *testing.T) {
		out, _ := json.Marshal(c.Providers)
		want := `{"anthropic":{"APIKey":"[redacted]","BaseURL":"","MaxConcurrent":0,"Timeouts":{"Connect":"10s","FirstByte":"2m0s","Idle":"2m0s","Total":"10m0s"}},"openai":{"APIKey":"[redacted]","BaseURL":"","MaxConcurrent":0,"Timeouts":{"Connect":"10s","FirstByte":"2m0s","Idle":"2m0s","Total":"10m0s"}}}`
		if string(out) != want {
			t.Errorf("json.Marshal(providers) = %s, want %s", out, want)
		}
	})
}

// RouteTo gives the workspace of a message's session: the matching
// binding's, else its adapter's own, else none; a bad workspace id is a
// config problem.
func TestRouteToWorkspace(t *testing.T) {
	c, err := Parse([]byte("agents:\n  - id: main\n  - id: team\nadapters:\n  - id: tg-main\n    type: telegram\n    workspace: ' family '\n"+
		"  - id: tg-work\n    type: telegram\nbindings:\n  - agent: team\n    chat: '-100'\n    workspace: acme.eng\n"), "parley.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ adapter, chat, agent, workspace string }{
		{"tg-main", "-100", "team", "acme.eng"}, // the binding's, over the adapter's
		{"tg-main", "42", "main", "family"},     // the adapter's
		{"tg-work", "42", "main", ""},           // none
		{"api", "x", "main", ""},
	} {
		if agent, ws := c.RouteTo(tc.adapter, tc.chat, "u"); agent != tc.agent || ws != tc.workspace {
			t.Errorf("RouteTo(%s, %s) = %q, %q; want %q, %q", tc.adapter, tc.chat, agent, ws, tc.agent, tc.workspace)
		}
	}
	_, err = Parse([]byte("agents:\n  - id: main\nadapters:\n  - id: tg-main\n    type: telegram\n    workspace: 'Team A'\nbindings:\n  - agent: main\n    chat: x\n    workspace: '-x'\n"), "parley.yaml", nil)
	for _, want := range []string{`adapters[0].workspace: "Team A" is not a workspace id`, `bindings[0].workspace: "-x" is not a workspace id`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("problems %v; want %q", err, want)
		}
	}
}
