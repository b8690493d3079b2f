package daemon

import (
	"errors"
	"testing"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/anthropic"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/llm/openai"
)

func TestModelFactory(t *testing.T) {
	cfg := config.Default()
	cfg.Providers.OpenAI.APIKey = "sk-test"
	models := modelFactory(cfg)
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
	cfg.Providers.Anthropic.APIKey = "sk-ant"
	if m, _ := modelFactory(cfg)("anthropic/claude-sonnet-4-5"); m == nil {
		t.Fatal("anthropic with a key gave nothing")
	} else if _, ok := m.(*anthropic.Model); !ok {
		t.Fatalf("anthropic with a key gave %T", m)
	}
}
