package doctor

import (
	"testing"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/llm"
)

type nopModel struct{ llm.Model }

func init() {
	llm.Register(llm.Provider{Name: "doctortest", DefaultBaseURL: "https://doctortest.example/v1",
		New: func(llm.Settings) llm.Model { return nopModel{} }})
}

// Doctor reaches a provider where its config says, else where the
// provider's package says it is, for the registered ones alike.
func TestProviderBase(t *testing.T) {
	cfg := config.Default()
	if got := providerBase(cfg, "doctortest"); got != "https://doctortest.example/v1" {
		t.Fatalf("a registered provider without a base_url is reached at %q", got)
	}
	cfg.Providers = llm.ProvidersConfig{"doctortest": {BaseURL: "http://127.0.0.1:9/v1"}}
	if got := providerBase(cfg, "doctortest"); got != "http://127.0.0.1:9/v1" {
		t.Fatalf("a base_url is not followed: %q", got)
	}
	if got := providerBase(cfg, "nowhere"); got != "" {
		t.Fatalf("an unknown provider is reached at %q", got)
	}
}
