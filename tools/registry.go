package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/telemetry"
)

// Registry holds the tools agents may select, and runs them: Call is the
// one door every tool call goes through. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]registered
	perms *permissions.Checker // nil: every call may run
	// scrub hides secrets in every result and error; nil hides none.
	scrub func(string) string
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
	return r.add(t, false)
}

// add compiles t and adds it, replacing a tool of the same name only if
// replace is set.
func (r *Registry) add(t Tool, replace bool) error {
	reg, err := compile(t)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]registered{}
	}
	if _, ok := r.tools[t.Name]; ok && !replace {
		return fmt.Errorf("%w: %s", ErrDuplicateTool, t.Name)
	}
	r.tools[t.Name] = reg
	return nil
}

// compile checks t and compiles its schema.
func compile(t Tool) (registered, error) {
	if t.Name == "" {
		return registered{}, fmt.Errorf("%w: empty name", ErrInvalidTool)
	}
	if t.Run == nil {
		return registered{}, fmt.Errorf("%w: %s has no Run function", ErrInvalidTool, t.Name)
	}
	reg := registered{tool: t}
	if len(bytes.TrimSpace(t.Schema)) > 0 {
		sch, err := compileSchema(t.Schema)
		if err != nil {
			return registered{}, fmt.Errorf("%w: schema of %s: %w", ErrInvalidTool, t.Name, err)
		}
		reg.schema = sch
	}
	return reg, nil
}

// Tool returns the tool registered as name.
func (r *Registry) Tool(name string) (Tool, bool) {
	reg, ok := r.lookup(name)
	return reg.tool, ok
}

// Select returns the named tools in the order given, each once; an unknown
// name is an error that names it.
func (r *Registry) Select(names []string) ([]Tool, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if r == nil {
		return nil, fmt.Errorf("%w: %s (no tool registry)", ErrUnknownTool, names[0])
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, 0, len(names))
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
		out = append(out, reg.tool)
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

// SetPermissions makes every call from now on pass p's check before it
// runs; nil lets every call run.
func (r *Registry) SetPermissions(p *permissions.Checker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.perms = p
}

// Permissions is the checker calls pass, nil when there is none.
func (r *Registry) Permissions() *permissions.Checker {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.perms
}

// Call runs one tool call and returns what the model is given. It is the
// one way a tool runs: the agent loop sends every call here (after
// refusing, as unknown, a name its agent was not offered), so what applies
// to every tool is checked here, once: the name, the arguments against the
// tool's schema, and the permission rules (which may ask the person and
// wait for the answer). A tool's error, a denial, a panic (recovered, with
// its stack in a *PanicError) and a call cut short by ctx come back as
// failed Results, never as a Go error or a crash.
func (r *Registry) Call(ctx context.Context, c Call) Result {
	ctx, span := telemetry.StartOp(ctx, "execute_tool", c.Name, telemetry.KindInternal)
	defer span.End()
	if span.On() {
		span.Str(telemetry.GenAIOperation, "execute_tool")
		span.Str(telemetry.GenAIToolName, c.Name)
		span.Str(telemetry.GenAIToolCallID, c.ID)
		if reg, ok := r.lookup(c.Name); ok && reg.tool.Server != "" {
			span.Str(telemetry.AttrMCPServer, reg.tool.Server)
		}
	}
	res := r.call(ctx, c)
	if scrub := r.scrubber(); scrub != nil {
		res.Content = scrub(res.Content)
		if res.Err != nil {
			if msg := scrub(res.Err.Error()); msg != res.Err.Error() {
				res.Err = &scrubbedError{msg: msg, err: res.Err}
			}
		}
	}
	span.Bool("parley.tool.error", res.IsError)
	span.Fail(res.Err)
	return res
}

// SetScrub makes every result and error from now on pass through scrub,
// which hides secrets (the secrets store's values, MCP servers' tokens):
// whatever a tool says, the model, the history and the log never see them.
func (r *Registry) SetScrub(scrub func(string) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scrub = scrub
}

func (r *Registry) scrubber() func(string) string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.scrub
}

// scrubbedError is a tool's error with secrets hidden in its text; errors.Is
// and errors.As still see the error it wraps.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

func (r *Registry) call(ctx context.Context, c Call) (res Result) {
	reg, perms, ok := r.lookupChecked(c.Name)
	if !ok {
		return Failed(fmt.Errorf("%w %s", ErrUnknownTool, c.Name))
	}
	if msg := reg.validate(c.Arguments); msg != "" {
		return Failed(fmt.Errorf("%w: %s", ErrInvalidArguments, msg))
	}
	if perms != nil {
		// A rule that says ask waits here for the person's answer.
		_, wait := telemetry.Start(ctx, telemetry.SpanPermission, telemetry.KindInternal)
		err := perms.Check(ctx, permissions.Call{Tool: c.Name, Arguments: c.Arguments, SessionID: string(c.SessionID),
			AgentID: c.Key.AgentID, Origin: c.Origin})
		wait.Bool("parley.permission.allowed", err == nil)
		wait.End()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return Aborted("aborted", context.Cause(ctx))
		default:
			return Failed(err)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			res = Failed(&PanicError{Tool: c.Name, Value: p, Stack: debug.Stack()})
		}
	}()
	var tried []Attempt
	for n := 1; ; n++ {
		out, err := reg.tool.Run(ctx, c)
		switch {
		case err == nil:
			res = Output(out)
		case ctx.Err() != nil:
			res = Aborted("aborted", context.Cause(ctx))
		default:
			class, wait, again := reg.tool.Retry.retries(n, err)
			if again {
				tried = append(tried, Attempt{N: n, Class: class, Error: err.Error()})
				if c.Retrying != nil {
					c.Retrying(tried[len(tried)-1], wait)
				}
				if sleep(ctx, wait) {
					continue
				}
				res = Aborted("aborted", context.Cause(ctx))
				break
			}
			res = Failed(err)
		}
		res.Attempts = tried
		return res
	}
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// lookupChecked is lookup with the permission checker, under one lock.
func (r *Registry) lookupChecked(name string) (registered, *permissions.Checker, bool) {
	if r == nil {
		return registered{}, nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.tools[name]
	return reg, r.perms, ok
}

func (r *Registry) lookup(name string) (registered, bool) {
	if r == nil {
		return registered{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.tools[name]
	return reg, ok
}

// validate checks args against the tool's schema and returns a message the
// model can act on, or "" when args are valid.
func (reg registered) validate(args json.RawMessage) string {
	v, err := readValue(args)
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

// Put registers t, replacing a tool of the same name: tools that come and
// go while parley runs (an MCP server's) are put and removed. A schema that
// doesn't compile is an error, and the old tool stays.
func (r *Registry) Put(t Tool) error {
	return r.add(t, true)
}

// Remove unregisters the named tool, if there is one.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tools, name)
}
