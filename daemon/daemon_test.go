package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/anthropic"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/llm/openai"
	"github.com/parleyd/parley/turns"
)

func TestModelFactory(t *testing.T) {
	cfg := config.Default()
	cfg.Providers = llm.ProvidersConfig{"openai": {APIKey: "sk-test"}}
	models := turns.Models(cfg)
	first, err := models("openai/gpt-4o-mini")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.(*openai.Model); !ok {
		t.Fatalf("openai with a key gave %T", first)
	}
	if again, _ := models("openai/gpt-4.1"); again != first {
		t.Fatal("a new client per call: clients must be shared across turns")
	}
	for _, spec := range []string{"echo", "echo/any-name"} {
		m, err := models(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.(*echo.Model); !ok {
			t.Fatalf("%s gave %T, want echo", spec, m)
		}
	}
	// A provider without a key is not configured: its chats are told so,
	// rather than answered by echo.
	if m, err := models("anthropic/claude-sonnet-4-5"); !errors.Is(err, llm.ErrNotConfigured) || m != nil {
		t.Fatalf("anthropic without a key gave %T, %v; want llm.ErrNotConfigured", m, err)
	}
	if _, err := models("carrier/pigeon"); err == nil {
		t.Fatal("an unknown provider was accepted")
	}
	cfg.Providers = llm.ProvidersConfig{"anthropic": {APIKey: "sk-ant"}}
	if m, _ := turns.Models(cfg)("anthropic/claude-sonnet-4-5"); m == nil {
		t.Fatal("anthropic with a key gave nothing")
	} else if _, ok := m.(*anthropic.Model); !ok {
		t.Fatalf("anthropic with a key gave %T", m)
	}
}

// registeredModel is the model of a provider registered the way a new
// provider's package registers itself.
type registeredModel struct{ settings llm.Settings }

func (m *registeredModel) Stream(_ context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	return llm.Response{Text: "from " + req.Model + " at " + m.settings.BaseURL}, nil
}

func init() {
	llm.Register(llm.Provider{Name: "registered", DefaultBaseURL: "https://registered.example/v1",
		New: func(s llm.Settings) llm.Model { return &registeredModel{settings: s} }})
}

// A provider registered by its own package (here, this file's init) is
// taken by the config (its section and model specs) and by the daemon,
// with nothing else edited.
func TestRegisteredProvider(t *testing.T) {
	cfg, err := config.Parse([]byte("providers:\n  registered:\n    base_url: http://127.0.0.1:9/v1\nagents:\n  - id: a\n    model: registered/m-1\n"),
		"parley.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	m, err := turns.Models(cfg)("registered/m-1")
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Stream(context.Background(), llm.Request{Model: "m-1"}, nil)
	if err != nil || res.Text != "from m-1 at http://127.0.0.1:9/v1" {
		t.Fatalf("the registered provider answered %q, %v", res.Text, err)
	}
	if _, err := config.Parse([]byte("providers:\n  unregistered: {api_key: k}\n"), "parley.yaml", func(string) (string, bool) { return "", false }); err == nil ||
		!strings.Contains(err.Error(), `"unregistered" is not a provider parley knows`) {
		t.Fatalf("an unknown provider section: %v", err)
	}
}
