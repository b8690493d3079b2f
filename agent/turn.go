package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
)

// turn is the state of one Run.
type turn struct {
	r    *Runner
	req  Request
	id   sessions.ID
	pctx context.Context // for persistence: still valid after an abort

	res   Result
	spec  string
	model llm.Model
	call  llm.Request
	tools map[string]registered

	lastSig string // doom loop: the last tool call and how often it repeated
	streak  int
	warned  bool
}

func (t *turn) run(ctx context.Context) (Result, error) {
	cfg := t.req.Agent
	for _, in := range t.req.Inputs {
		if err := t.append(sessions.Message{ID: in.ID, Role: sessions.RoleUser, Content: in.Text, Synthetic: in.Synthetic}); err != nil {
			return t.res, err
		}
	}
	if err := t.prepare(ctx); err != nil {
		return t.res, err
	}
	t.r.publish(t.id, EventTurnStarted, TurnStarted{AgentID: cfg.ID, Model: t.spec})

	limit := maxSteps(cfg)
	for step := 1; ; step++ {
		if step > 1 {
			if err := t.steer(); err != nil {
				return t.res, err
			}
		}
		if ctx.Err() != nil {
			return t.abort(ctx)
		}
		resp, err := t.stream(ctx)
		t.res.Steps++
		t.res.Usage = t.res.Usage.Add(resp.Usage)
		if err != nil {
			return t.fail(ctx, resp, err)
		}
		if err := t.appendAssistant(resp); err != nil {
			return t.res, err
		}
		if len(resp.ToolCalls) == 0 {
			t.res.Reply = resp.Text
			return t.res, nil
		}
		results := t.runTools(ctx, resp.ToolCalls)
		if err := t.appendResults(resp.ToolCalls, results); err != nil {
			return t.res, err
		}
		if ctx.Err() != nil {
			t.res.Reply = resp.Text
			return t.abort(ctx)
		}
		if err := t.checkDoomLoop(resp.ToolCalls); err != nil {
			return t.res, err
		}
		if step >= limit {
			note := fmt.Sprintf("I stopped after %d steps, the most one turn may take, before finishing. Send another message to let me continue.", limit)
			if err := t.append(sessions.Message{Role: sessions.RoleAssistant, Content: note, Synthetic: true}); err != nil {
				return t.res, err
			}
			t.res.Reply = joinNonEmpty(resp.Text, note)
			return t.res, nil
		}
	}
}

// prepare resolves the model and tools and assembles the prompt and history.
func (t *turn) prepare(ctx context.Context) error {
	cfg, sess := t.req.Agent, t.req.Session
	t.spec = resolveModel(t.req.Inputs, sess, cfg.Model, t.r.opts.DefaultModel)
	model, name, err := t.r.model(t.id, t.spec)
	if err != nil {
		return err
	}
	t.model = model
	regs, err := t.r.opts.Tools.selectRegistered(cfg.Tools)
	if err != nil {
		return fmt.Errorf("select tools for agent %s: %w", cfg.ID, err)
	}
	t.tools = make(map[string]registered, len(regs))
	var tools []Tool
	var llmTools []llm.Tool
	for _, reg := range regs {
		t.tools[reg.tool.Name] = reg
		tools = append(tools, reg.tool)
		llmTools = append(llmTools, reg.llmTool())
	}

	kind := sess.Key.Kind()
	minimal := minimalMode(cfg, kind)
	p := Prompt{
		Agent:    cfg.Prompt,
		Skills:   cfg.SkillIndex,
		Now:      t.r.now(),
		Location: cfg.Location,
		Surface:  sess.Key.Surface,
		Tools:    tools,
		Minimal:  minimal,
	}
	if !minimal {
		p.Workspace = t.r.workspaceInstructions(ctx, cfg.WorkspaceDir)
	}
	if kind == "channel" {
		p.DisplayName = displayName(t.req.Inputs)
	}

	stored, err := t.r.opts.Store.Messages(t.pctx, t.id, sessions.MessagesOptions{})
	if err != nil {
		return fmt.Errorf("load history of session %s: %w", t.id, err)
	}
	turns := cmp.Or(max(cfg.HistoryTurns, 0), historyTurns(kind))
	t.call = llm.Request{
		Model:     name,
		System:    BuildSystemPrompt(p),
		Messages:  toLLM(capTurns(stored, turns)),
		Tools:     llmTools,
		MaxTokens: cfg.MaxOutputTokens,
	}
	return nil
}

func (t *turn) stream(ctx context.Context) (llm.Response, error) {
	call := t.call
	call.Messages = append([]llm.Message(nil), t.call.Messages...)
	resp, err := t.model.Stream(ctx, call, func(d llm.Delta) {
		if d.Text != "" {
			t.r.publish(t.id, EventMessageDelta, d.Text)
		}
	})
	t.r.statuses.update(t.id, func(s *Status) {
		if s.State == StateRetrying {
			s.State, s.Attempt, s.Message = StateBusy, 0, ""
		}
	})
	return resp, err
}

// fail records what a failed model call left, truthfully, and returns the
// error: an abort when ctx ended, the model's error otherwise.
func (t *turn) fail(ctx context.Context, resp llm.Response, err error) (Result, error) {
	aborted := ctx.Err() != nil || errors.Is(err, context.Canceled)
	result := "error: the model call failed before this tool ran"
	if aborted {
		result = "aborted"
	}
	if resp.Text != "" || len(resp.ToolCalls) > 0 {
		if aerr := t.appendAssistant(resp); aerr != nil {
			return t.res, errors.Join(err, aerr)
		}
		results := make([]string, len(resp.ToolCalls))
		for i := range results {
			results[i] = result
		}
		if aerr := t.appendResults(resp.ToolCalls, results); aerr != nil {
			return t.res, errors.Join(err, aerr)
		}
	}
	t.res.Reply = resp.Text
	if aborted {
		t.res.Aborted = true
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return t.res, fmt.Errorf("turn in session %s aborted: %w", t.id, err)
	}
	return t.res, fmt.Errorf("model %s: %w", t.spec, err)
}

func (t *turn) abort(ctx context.Context) (Result, error) {
	t.res.Aborted = true
	return t.res, fmt.Errorf("turn in session %s aborted: %w", t.id, ctx.Err())
}

func (t *turn) steer() error {
	if t.req.Steer == nil {
		return nil
	}
	for _, in := range t.req.Steer() {
		if err := t.append(sessions.Message{ID: in.ID, Role: sessions.RoleUser, Content: in.Text, Synthetic: in.Synthetic}); err != nil {
			return err
		}
		t.call.Messages = append(t.call.Messages, llm.Message{Role: llm.RoleUser, Content: in.Text})
	}
	return nil
}

// runTools runs one step's calls concurrently, at most MaxParallelTools at
// once, and returns their results in call order.
func (t *turn) runTools(ctx context.Context, calls []llm.ToolCall) []string {
	results := make([]string, len(calls))
	sem := make(chan struct{}, MaxParallelTools)
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				results[i] = "aborted"
				return
			}
			results[i] = t.runTool(ctx, c)
		})
	}
	wg.Wait()
	return results
}

func (t *turn) runTool(ctx context.Context, c llm.ToolCall) string {
	t.r.publish(t.id, EventToolStarted, ToolEvent{CallID: c.ID, Name: c.Name})
	result := t.toolResult(ctx, c)
	t.r.publish(t.id, EventToolCompleted, ToolEvent{CallID: c.ID, Name: c.Name, Result: result,
		IsError: result == "aborted" || strings.HasPrefix(result, "error: ")})
	return result
}

func (t *turn) toolResult(ctx context.Context, c llm.ToolCall) (result string) {
	reg, ok := t.tools[c.Name]
	if !ok {
		return "error: unknown tool " + c.Name
	}
	if msg := reg.validate(c.Arguments); msg != "" {
		return "error: invalid arguments: " + msg
	}
	defer func() {
		if p := recover(); p != nil {
			t.r.log.ErrorContext(ctx, "tool panicked", "session_id", t.id, "tool", c.Name, "panic", p, "stack", string(debug.Stack()))
			result = fmt.Sprintf("error: tool %s crashed: %v", c.Name, p)
		}
	}()
	out, err := reg.tool.Run(ctx, Call{SessionID: t.id, Key: t.req.Session.Key, ID: c.ID, Arguments: c.Arguments})
	switch {
	case err == nil:
		return out
	case ctx.Err() != nil:
		return "aborted"
	default:
		return "error: " + err.Error()
	}
}

// checkDoomLoop warns the model, once per streak, when its last three tool
// calls were identical.
func (t *turn) checkDoomLoop(calls []llm.ToolCall) error {
	for _, c := range calls {
		sig := c.Name + "\x00" + canonicalArgs(c.Arguments)
		if sig != t.lastSig {
			t.lastSig, t.streak, t.warned = sig, 0, false
		}
		t.streak++
	}
	if t.streak < 3 || t.warned {
		return nil
	}
	t.warned = true
	name := calls[len(calls)-1].Name
	warning := fmt.Sprintf("You have called %s with the same arguments %d times in a row. "+
		"Repeating it will not change the result: try a different approach, or answer with what you have.", name, t.streak)
	if err := t.append(sessions.Message{Role: sessions.RoleSystem, Content: warning, Synthetic: true}); err != nil {
		return err
	}
	t.call.Messages = append(t.call.Messages, llm.Message{Role: llm.RoleSystem, Content: warning})
	return nil
}

func (t *turn) appendAssistant(resp llm.Response) error {
	u := sessions.Usage{Input: resp.Usage.Input, Output: resp.Usage.Output, Reasoning: resp.Usage.Reasoning,
		CacheRead: resp.Usage.CacheRead, CacheWrite: resp.Usage.CacheWrite}
	m := sessions.Message{Role: sessions.RoleAssistant, Content: resp.Text, Model: t.spec, Usage: &u}
	am := llm.Message{Role: llm.RoleAssistant, Content: resp.Text}
	for _, c := range resp.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, sessions.ToolCall{ID: c.ID, Name: c.Name, Arguments: storableArgs(c.Arguments)})
		am.ToolCalls = append(am.ToolCalls, c)
	}
	if err := t.append(m); err != nil {
		return err
	}
	t.call.Messages = append(t.call.Messages, am)
	return nil
}

func (t *turn) appendResults(calls []llm.ToolCall, results []string) error {
	for i, c := range calls {
		if err := t.append(sessions.Message{Role: sessions.RoleTool, Content: results[i], ToolCallID: c.ID}); err != nil {
			return err
		}
		t.call.Messages = append(t.call.Messages, llm.Message{Role: llm.RoleTool, Content: results[i], ToolCallID: c.ID})
	}
	return nil
}

func (t *turn) append(m sessions.Message) error {
	stored, err := t.r.opts.Store.Append(t.pctx, t.id, m)
	if err != nil {
		return fmt.Errorf("append %s message to session %s: %w", m.Role, t.id, err)
	}
	t.res.Messages = append(t.res.Messages, stored)
	return nil
}

// storableArgs keeps what the model wrote: arguments that are not valid JSON
// are stored as a JSON string of their text, since the column holds JSON.
func storableArgs(args json.RawMessage) json.RawMessage {
	if len(args) == 0 || json.Valid(args) {
		return args
	}
	b, _ := json.Marshal(string(args)) // marshalling a string cannot fail
	return b
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n\n")
}
