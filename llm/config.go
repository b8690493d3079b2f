package llm

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/secret"
)

// TimeoutsConfig is Timeouts as the config writes them (a provider's
// timeouts, an agent's overrides): each model call's deadlines, one
// attempt's (each retry gets them anew).
type TimeoutsConfig struct {
	// Connect bounds reaching the provider (TCP and TLS).
	Connect section.Duration `yaml:"connect"`
	// FirstByte bounds the wait, once connected, for the reply's first
	// byte.
	FirstByte section.Duration `yaml:"first_byte"`
	// Idle bounds the silence between two chunks of the stream.
	Idle section.Duration `yaml:"idle"`
	// Total bounds the whole call.
	Total section.Duration `yaml:"total"`
}

// Timeouts are t as the model clients take them.
func (t TimeoutsConfig) Timeouts() Timeouts {
	return Timeouts{Connect: t.Connect.Std(), FirstByte: t.FirstByte.Std(), Idle: t.Idle.Std(), Total: t.Total.Std()}
}

// ProvidersConfig is the providers section of parley's config: the
// settings of each model provider, by its name in model specs ("openai",
// "anthropic", or any other registered with Register).
type ProvidersConfig map[string]ProviderConfig

// ProviderConfig is how to reach one model provider's API.
type ProviderConfig struct {
	// APIKey is the provider's API key; empty when not configured.
	APIKey secret.String `yaml:"api_key"`
	// BaseURL optionally replaces the provider's API address, e.g. for an
	// OpenAI-compatible server such as Ollama (http://localhost:11434/v1),
	// vLLM or OpenRouter. It is an http:// or https:// URL when set.
	BaseURL string `yaml:"base_url"`
	// MaxConcurrent caps the calls in flight to this provider, so a burst
	// of chats waits its turn instead of tripping the provider's rate
	// limits; 0: no cap.
	MaxConcurrent int `yaml:"max_concurrent"`
	// Timeouts bound each call to the provider; a call past one is
	// retried, then handed to the agent's fallback_models.
	Timeouts TimeoutsConfig `yaml:"timeouts"`
}

// Configured reports whether the provider has an API key or a base URL.
func (p ProviderConfig) Configured() bool { return p.APIKey != "" || p.BaseURL != "" }

// Lookup returns the settings of the provider named in a model spec, and
// whether the name is a provider parley knows (registered with
// Register); an unset section is a known provider not configured.
func (p ProvidersConfig) Lookup(name string) (ProviderConfig, bool) {
	if _, ok := Lookup(name); !ok {
		return ProviderConfig{}, false
	}
	return p[name], true
}

// Settings are the provider's settings as its client takes them.
func (p ProviderConfig) Settings() Settings {
	return Settings{APIKey: p.APIKey.Reveal(), BaseURL: p.BaseURL, Timeouts: p.Timeouts.Timeouts()}
}

// SetDefaults drops the providers left empty and fills in each one's
// timeouts.
func (ps *ProvidersConfig) SetDefaults(set section.Set) {
	for name, p := range *ps {
		p.APIKey = secret.String(strings.TrimSpace(string(p.APIKey)))
		p.BaseURL = strings.TrimSpace(p.BaseURL)
		if bare := (ProviderConfig{APIKey: p.APIKey, BaseURL: p.BaseURL, MaxConcurrent: p.MaxConcurrent}); bare == (ProviderConfig{}) {
			// A section left empty (an unset ${VAR}), or with only its
			// timeouts, is no section: nothing calls the provider.
			delete(*ps, name)
			continue
		}
		k, d := name+".timeouts.", DefaultTimeouts
		section.Default(&p.Timeouts.Connect, set, k+"connect", section.Duration(d.Connect))
		section.Default(&p.Timeouts.FirstByte, set, k+"first_byte", section.Duration(d.FirstByte))
		section.Default(&p.Timeouts.Idle, set, k+"idle", section.Duration(d.Idle))
		section.Default(&p.Timeouts.Total, set, k+"total", section.Duration(d.Total))
		(*ps)[name] = p
	}
	if len(*ps) == 0 {
		*ps = nil
	}
}

// Check reports each provider's problems, by its name.
func (ps ProvidersConfig) Check(r section.Reporter) {
	for _, name := range slices.Sorted(maps.Keys(ps)) {
		if _, ok := Lookup(name); !ok {
			r.Add(name, fmt.Sprintf("%q is not a provider parley knows; use one of %s", name, strings.Join(Providers()[1:], ", ")))
			continue
		}
		ps[name].check(section.Prefixed(r, name))
	}
}

func (p ProviderConfig) check(r section.Reporter) {
	if strings.ContainsAny(p.APIKey.Reveal(), " \t\r\n") {
		// Never quote the key itself.
		r.Add("api_key", "contains spaces or line breaks; an API key is a single word, e.g. ${OPENAI_API_KEY}")
	}
	for _, d := range []struct {
		key string
		v   section.Duration
	}{{"connect", p.Timeouts.Connect}, {"first_byte", p.Timeouts.FirstByte}, {"idle", p.Timeouts.Idle}, {"total", p.Timeouts.Total}} {
		if d.v <= 0 {
			r.Add("timeouts."+d.key, fmt.Sprintf(`%s is not allowed: every model call needs a deadline; use a duration above 0 such as "2m"`, d.v))
		}
	}
	if p.MaxConcurrent < 0 || p.MaxConcurrent > 10000 {
		r.Add("max_concurrent", fmt.Sprintf("%d is out of range; use 1-10000, or 0 for no cap", p.MaxConcurrent))
	}
	if p.BaseURL == "" {
		return
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL may hold a password, so show it redacted.
		r.Add("base_url", fmt.Sprintf(`%q is not an http:// or https:// URL; use one such as "http://localhost:11434/v1" (Ollama) `+
			`or "https://openrouter.ai/api/v1", or leave it empty for the provider's own API`, secret.DSN(p.BaseURL).String()))
	}
}
