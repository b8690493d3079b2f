package llm

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Settings are one provider's settings, from its section of the config
// (providers.<name>).
type Settings struct {
	// APIKey is the provider's key; empty for a server that needs none.
	APIKey string
	// BaseURL replaces the provider's address (an OpenAI-compatible
	// server, a proxy); empty means the provider's DefaultBaseURL.
	BaseURL string
	// Timeouts bound each call; zero fields are DefaultTimeouts'.
	Timeouts Timeouts
}

// Provider is a kind of model API parley can call: registered by its
// package's init, named by the part of a model spec before the slash
// ("openai" in "openai/gpt-4o-mini"), and set up by its config section.
// Adding one is a package that calls Register and an import line.
type Provider struct {
	// Name is the provider's name in model specs and in the config.
	Name string
	// DefaultBaseURL is where its API is when providers.<name>.base_url
	// is unset (doctor checks the clock against it).
	DefaultBaseURL string
	// New makes the provider's client from its settings: one Model,
	// shared by every call, which puts each request's Model in its call.
	New func(s Settings) Model
	// KeyEnv is the environment variable its API key is usually in, and
	// SmallModel a small, cheap model of its own: parley init offers
	// them.
	KeyEnv, SmallModel string
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Provider{}
)

// Register adds a provider; a second provider of the same name, or one
// without a name or a New, panics (registration is a program's own init).
func Register(p Provider) {
	registryMu.Lock()
	defer registryMu.Unlock()
	switch {
	case p.Name == "" || p.Name == "echo" || p.New == nil:
		panic(fmt.Sprintf("llm: Register(%q): a provider needs a name other than echo and a New", p.Name))
	case registry[p.Name].Name != "":
		panic(fmt.Sprintf("llm: provider %q registered twice", p.Name))
	}
	registry[p.Name] = p
}

// Registered are the registered providers, by name.
func Registered() []Provider {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]Provider, 0, len(registry))
	for _, p := range registry {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Provider) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup is the registered provider called name.
func Lookup(name string) (Provider, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	p, ok := registry[name]
	return p, ok
}

// Providers lists the provider names ParseModel accepts: echo (offline,
// built in) and every registered provider, sorted.
func Providers() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry)+1)
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return append([]string{"echo"}, names...)
}
