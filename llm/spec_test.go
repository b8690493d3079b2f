package llm_test

import (
	"strings"
	"testing"

	"github.com/parleyd/parley/llm"
	_ "github.com/parleyd/parley/llm/anthropic"
	_ "github.com/parleyd/parley/llm/openai"
)

func TestParseModel(t *testing.T) {
	tests := []struct {
		spec, provider, model string
		errHas                string
	}{
		{"echo", "echo", "", ""},
		{"echo/anything", "echo", "anything", ""},
		{"openai/gpt-4o-mini", "openai", "gpt-4o-mini", ""},
		{"anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", ""},
		{"openai/meta-llama/Llama-3-8b", "openai", "meta-llama/Llama-3-8b", ""},
		{"", "", "", "unknown provider"},
		{"gpt-4o", "", "", "want one of echo, anthropic/<model>, openai/<model>"},
		{"google/gemini", "", "", "unknown provider \"google\""},
		{"OpenAI/gpt-4o", "", "", "unknown provider"},
		{"openai", "", "", "needs a model name"},
		{"anthropic/", "", "", "needs a model name"},
		{"openai/ gpt", "", "", "spaces"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			p, m, err := llm.ParseModel(tc.spec)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("ParseModel(%q) err = %v, want it to mention %q", tc.spec, err, tc.errHas)
				}
				return
			}
			if err != nil || p != tc.provider || m != tc.model {
				t.Errorf("ParseModel(%q) = %q, %q, %v", tc.spec, p, m, err)
			}
		})
	}
}

// A provider registers once, by name; a second of the same name is a
// program error.
func TestRegisterProvider(t *testing.T) {
	if p, ok := llm.Lookup("openai"); !ok || p.DefaultBaseURL == "" || p.New == nil {
		t.Fatalf("openai is not registered whole: %+v %v", p, ok)
	}
	if _, ok := llm.Lookup("gemini"); ok {
		t.Fatal("an unregistered provider is found")
	}
	for _, p := range []llm.Provider{{Name: "openai", New: func(llm.Settings) llm.Model { return nil }}, {Name: "echo"}, {Name: "x"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", p.Name)
				}
			}()
			llm.Register(p)
		}()
	}
}
