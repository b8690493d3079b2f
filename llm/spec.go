package llm

import (
	"fmt"
	"slices"
	"strings"
)

// ParseModel splits a model spec "provider/model" as written in config:
//
//	"echo"                         → ("echo", "")
//	"openai/gpt-4o-mini"           → ("openai", "gpt-4o-mini")
//	"anthropic/claude-sonnet-4-5"  → ("anthropic", "claude-sonnet-4-5")
//	"openai/meta-llama/Llama-3-8b" → ("openai", "meta-llama/Llama-3-8b")
//
// Everything after the first slash is the provider's own model name. echo
// needs no model name; the others do.
func ParseModel(s string) (provider, model string, err error) {
	provider, model, _ = strings.Cut(s, "/")
	if known := Providers(); !slices.Contains(known, provider) {
		forms := []string{"echo"}
		for _, p := range known[1:] {
			forms = append(forms, p+"/<model>")
		}
		return "", "", fmt.Errorf("model %q: unknown provider %q: want one of %s", s, provider, strings.Join(forms, ", "))
	}
	if model == "" && provider != "echo" {
		return "", "", fmt.Errorf("model %q: %s needs a model name: %s/<model>", s, provider, provider)
	}
	if strings.TrimSpace(model) != model {
		return "", "", fmt.Errorf("model %q: model name has surrounding spaces", s)
	}
	return provider, model, nil
}
