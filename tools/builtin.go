package tools

import (
	"fmt"
	"reflect"
	"sort"
	"sync"

	"github.com/parleyd/parley/config"
)

// A Maker makes a package's built-in tools over the parts deps provides.
// Called with Deps of no parts (to learn the tools' names, as `parley
// config check` does), it still returns every tool: its parts are then
// nil, and the tools are never run.
type Maker func(deps Deps) []Tool

// Deps are what built-in tools are made over: the running config and the
// daemon's parts, each found by its type (Part).
type Deps struct {
	// Config is the config the daemon runs on now; nil when the tools
	// are made only for their names.
	Config func() *config.Config
	parts  map[reflect.Type]any
}

// Provide adds parts, each found by its own type.
func (d *Deps) Provide(parts ...any) {
	if d.parts == nil {
		d.parts = map[reflect.Type]any{}
	}
	for _, p := range parts {
		d.parts[reflect.TypeOf(p)] = p
	}
}

// Part is the part of type T deps provides; T's zero value (a nil store)
// without one.
func Part[T any](deps Deps) T {
	p, _ := deps.parts[reflect.TypeFor[T]()].(T)
	return p
}

var (
	buildersMu sync.Mutex
	builders   = map[string]Maker{}
)

// RegisterBuiltin makes mk's tools built-in: every daemon registers
// them, and an agent may name them. A package calls it from its init,
// under its own name; a name registered twice panics.
func RegisterBuiltin(name string, mk Maker) {
	buildersMu.Lock()
	defer buildersMu.Unlock()
	if _, dup := builders[name]; dup {
		panic(fmt.Sprintf("tools: built-in tools %q registered twice", name))
	}
	builders[name] = mk
}

// RegisterBuiltins adds every built-in tool, made over deps, to reg.
func RegisterBuiltins(reg *Registry, deps Deps) error {
	buildersMu.Lock()
	names := make([]string, 0, len(builders))
	for n := range builders {
		names = append(names, n)
	}
	buildersMu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		buildersMu.Lock()
		mk := builders[n]
		buildersMu.Unlock()
		for _, t := range mk(deps) {
			if err := reg.Register(t); err != nil {
				return fmt.Errorf("built-in tools %s: %w", n, err)
			}
		}
	}
	return nil
}

// BuiltinNames lists the built-in tools an agent may name, from the same
// registration a daemon starts with.
func BuiltinNames() ([]string, error) {
	reg := NewRegistry()
	if err := RegisterBuiltins(reg, Deps{}); err != nil {
		return nil, err
	}
	return reg.Names(), nil
}

// BuiltinGroup lists the tools one package registers as built-ins (its
// RegisterBuiltin name, such as "files" or "sql"); ok is false for a name
// no package registered.
func BuiltinGroup(name string) (names []string, ok bool) {
	buildersMu.Lock()
	mk, ok := builders[name]
	buildersMu.Unlock()
	if !ok {
		return nil, false
	}
	for _, t := range mk(Deps{}) {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names, true
}
