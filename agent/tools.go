package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
)

// Tool is a function the model may call. Its arguments are validated against
// Schema (a JSON Schema of the arguments object; empty means any object)
// before Run sees them.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	Run         func(ctx context.Context, call Call) (string, error)
}

// Call is one invocation of a tool, with the session it runs for.
type Call struct {
	SessionID sessions.ID
	Key       sessions.Key
	// ID is the model's tool call id.
	ID        string
	Arguments json.RawMessage
}

// Registry holds the tools agents may select. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]registered
}

type registered struct {
	tool   Tool
	schema *schema // nil when the tool has no schema
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]registered{}}
}

// Register adds t. A duplicate name, a missing Run or a schema that does not
// compile is an error.
func (r *Registry) Register(t Tool) error {
	if t.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidTool)
	}
	if t.Run == nil {
		return fmt.Errorf("%w: %s has no Run function", ErrInvalidTool, t.Name)
	}
	reg := registered{tool: t}
	if len(bytes.TrimSpace(t.Schema)) > 0 {
		sch, err := compileSchema(t.Schema)
		if err != nil {
			return fmt.Errorf("%w: schema of %s: %w", ErrInvalidTool, t.Name, err)
		}
		reg.schema = sch
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]registered{}
	}
	if _, ok := r.tools[t.Name]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicateTool, t.Name)
	}
	r.tools[t.Name] = reg
	return nil
}

// Tool returns the tool registered as name.
func (r *Registry) Tool(name string) (Tool, bool) {
	if r == nil {
		return Tool{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.tools[name]
	return reg.tool, ok
}

// Select returns the named tools in the order given; an unknown name is an
// error that names it.
func (r *Registry) Select(names []string) ([]Tool, error) {
	regs, err := r.selectRegistered(names)
	if err != nil {
		return nil, err
	}
	out := make([]Tool, len(regs))
	for i, reg := range regs {
		out[i] = reg.tool
	}
	return out, nil
}

// Names lists the registered tool names, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (r *Registry) selectRegistered(names []string) ([]registered, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if r == nil {
		return nil, fmt.Errorf("%w: %s (no tool registry)", ErrUnknownTool, names[0])
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]registered, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		reg, ok := r.tools[n]
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrUnknownTool, n)
		}
		seen[n] = true
		out = append(out, reg)
	}
	return out, nil
}

// validate checks args against the tool's schema and returns a message the
// model can act on, or "" when args are valid.
func (reg registered) validate(args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	v, err := decodeArgs(args)
	if err != nil {
		return fmt.Sprintf("arguments are not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return "arguments must be a JSON object"
	}
	if reg.schema == nil {
		return ""
	}
	return strings.Join(reg.schema.validate(v, ""), "; ")
}

func (reg registered) llmTool() llm.Tool {
	return llm.Tool{Name: reg.tool.Name, Description: reg.tool.Description, Schema: reg.tool.Schema}
}

// canonicalArgs renders args with sorted keys and no spacing, so two calls
// that differ only in formatting compare equal.
func canonicalArgs(args json.RawMessage) string {
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return string(bytes.TrimSpace(args))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(args)
	}
	return string(b)
}
