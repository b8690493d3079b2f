package adapters

import (
	"database/sql"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/parleyd/parley/vault"
)

// Decoder strictly decodes an adapter's own config section into v; unknown
// keys are errors. The core never knows an adapter's fields.
type Decoder func(v any) error

// Deps is what the daemon hands every adapter it builds.
type Deps struct {
	Log *slog.Logger
	// DB is parley's own database, for an adapter that keeps state there
	// (WhatsApp's device store), and Dialect is "sqlite" or "postgres".
	// Both are unset when the config is only being checked: a factory must
	// not touch the database; Start may.
	DB      *sql.DB
	Dialect string
	// Vault is parley's secrets store, for an adapter that seals what it
	// keeps (WhatsApp's device keys); nil when the config is only being
	// checked. Without a key set it seals nothing.
	Vault *vault.Store
	// Refused, if set, counts a request refused at the channel's own
	// webhook (a wrong secret token, an address throttled for guessing),
	// with a short reason.
	Refused func(reason string)
}

// CountRefused counts a refused webhook request through d.Refused, if set.
func (d Deps) CountRefused(reason string) {
	if d.Refused != nil {
		d.Refused(reason)
	}
}

// Logger is d.Log, or a logger that drops everything when it is unset.
func (d Deps) Logger() *slog.Logger {
	if d.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Log
}

// Backoff is a wait before retry n (from 1) that starts at first and
// doubles up to max.
func Backoff(first, max time.Duration) func(n int) time.Duration {
	return func(n int) time.Duration {
		d := first
		for i := 1; i < n && d < max; i++ {
			d *= 2
		}
		return min(d, max)
	}
}

// Factory builds one adapter instance from its config section.
type Factory func(id ID, decode Decoder, deps Deps) (Adapter, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes an adapter type available by name. Call it from init.
// Registering a name twice is a programming error and panics, as
// database/sql does.
func Register(typ string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if f == nil {
		panic("adapters: Register " + typ + " with a nil factory")
	}
	if _, dup := registry[typ]; dup {
		panic("adapters: Register called twice for " + typ)
	}
	registry[typ] = f
}

// RegisterNew is Register for a constructor that returns its own adapter
// type: when it fails, the factory returns a nil Adapter, not a typed nil.
func RegisterNew[A Adapter](typ string, newAdapter func(id ID, decode Decoder, deps Deps) (A, error)) {
	Register(typ, func(id ID, decode Decoder, deps Deps) (Adapter, error) {
		a, err := newAdapter(id, decode, deps)
		if err != nil {
			return nil, err
		}
		return a, nil
	})
}

// Types lists the registered adapter types, sorted.
func Types() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// New builds an adapter of a registered type.
func New(typ string, id ID, decode Decoder, deps Deps) (Adapter, error) {
	registryMu.RLock()
	f, ok := registry[typ]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q for adapter %s; known types: %s", ErrUnknownType, typ, id, strings.Join(Types(), ", "))
	}
	a, err := f(id, decode, deps)
	if err != nil {
		return nil, fmt.Errorf("adapter %s (%s): %w", id, typ, err)
	}
	return a, nil
}
