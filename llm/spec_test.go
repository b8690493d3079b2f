package llm

import (
	"strings"
	"testing"
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
		{"gpt-4o", "", "", "want one of echo, openai/<model>, anthropic/<model>"},
		{"google/gemini", "", "", "unknown provider \"google\""},
		{"OpenAI/gpt-4o", "", "", "unknown provider"},
		{"openai", "", "", "needs a model name"},
		{"anthropic/", "", "", "needs a model name"},
		{"openai/ gpt", "", "", "spaces"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			p, m, err := ParseModel(tc.spec)
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
