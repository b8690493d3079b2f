package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/skills"
	"github.com/parleyd/parley/telemetry"
	"github.com/parleyd/parley/tools"
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
	// digest is the system prompt's, for each assistant message's metadata.
	digest string
	// fallback is how many of the agent's fallback models were tried.
	fallback int
	call     llm.Request
	// reg runs the turn's tool calls; offered are the names the model was
	// given, the only ones it may call.
	reg     *tools.Registry
	offered map[string]bool
	// local runs the turn's own tools (turnTools): the skill tool and the
	// client's; modelSchemas are the schemas the model gets of client
	// tools whose arguments the client checks itself.
	local        *tools.Registry
	modelSchemas map[string]json.RawMessage
	skills       []skills.Skill
	// waitingFor are the client tool calls the turn waits for.
	waitMu     sync.Mutex
	waitingFor []string

	// joined are the run ids of the inputs steered into the turn.
	joined []string
	// answering are the ids of the user messages the turn answers, its
	// inputs and those steered in, as stored.
	answering []string
	// historyRead: the turn has read its history once already.
	historyRead bool

	// attached are the parts tools added to the turn's reply (files to
	// send with it), in the order they were added.
	attachMu sync.Mutex
	attached []sessions.Part

	lastSig string // doom loop: the last tool call and how often it repeated
	streak  int
	warned  bool

	asking     asking             // the permission questions open
	side       *SideTurn          // set on a side turn (the memory flush)
	window     int                // the model's context window; 0 if unknown
	history    []sessions.Message // the live context, side turns left out
	aggressive bool               // prune harder: the provider said the prompt is too long
	compacted  bool               // a compaction ran (or was tried) before the turn
}

func (t *turn) run(ctx context.Context) (Result, error) {
	cfg := t.req.Agent
	for _, in := range t.req.Inputs {
		if err := t.appendInput(in); err != nil {
			return t.res, err
		}
	}
	if t.r.opts.Admit != nil && t.side == nil {
		// A turn the operator's rules refuse (a spend cap reached) ends
		// here, before any model is called.
		if err := t.r.opts.Admit(ctx, t.req.Session); err != nil {
			return t.res, err
		}
	}
	if err := t.prepare(ctx, true); err != nil {
		return t.res, err
	}
	// Started before a compaction it needs first, so the run's stream
	// shows that compaction as part of the run.
	t.publish(EventTurnStarted, TurnStarted{AgentID: cfg.ID, Model: t.spec, RunIDs: runIDs(t.req.Inputs)})
	if err := t.compactBefore(ctx); err != nil {
		if ctx.Err() != nil {
			return t.abort(ctx)
		}
		return t.res, err
	}

	limit := maxSteps(cfg)
	if t.side != nil && t.side.MaxSteps > 0 {
		limit = t.side.MaxSteps
	}
	for step := 1; ; step++ {
		if step > 1 {
			if err := t.steer(); err != nil {
				return t.res, err
			}
		}
		if ctx.Err() != nil {
			return t.abort(ctx)
		}
		resp, err := t.callModel(ctx)
		t.res.Steps++
		t.res.Usage = t.res.Usage.Add(resp.Usage)
		if err != nil {
			return t.fail(ctx, resp, err)
		}
		if len(resp.ToolCalls) == 0 {
			t.res.Reply = resp.Text
			if err := t.appendReply(resp); err != nil {
				t.res.Reply = ""
				return t.res, err
			}
			return t.res, nil
		}
		if err := t.appendAssistant(resp); err != nil {
			return t.res, err
		}
		results := t.runTools(ctx, resp.ToolCalls)
		if err := t.appendResults(resp.ToolCalls, results); err != nil {
			return t.res, err
		}
		if err := clientTimeout(results); err != nil {
			return t.res, err
		}
		if ctx.Err() != nil {
			t.res.Reply = resp.Text
			return t.abort(ctx)
		}
		if err := t.checkDoomLoop(resp.ToolCalls); err != nil {
			return t.res, err
		}
		if step >= limit && t.side != nil {
			t.res.Reply = resp.Text
			return t.res, nil
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

// prepare resolves the model and tools and assembles the prompt and
// history. With open false it only measures: no model is opened.
func (t *turn) prepare(ctx context.Context, open bool) error {
	cfg, sess := t.req.Agent, t.req.Session
	t.spec = resolveModel(t.req.Inputs, sess, cfg.Model, t.r.opts.DefaultModel)
	var name string
	if open {
		model, n, err := t.r.model(t.id, t.spec, t.req.OnStatus)
		if err != nil {
			return err
		}
		t.model, name = model, n
	} else if t.spec != "" {
		_, name, _ = llm.ParseModel(t.spec)
	}
	t.window = t.r.contextWindow(t.spec, t.r.ownModel(sess, cfg), cfg)
	selected, err := t.selectTools()
	if err != nil {
		return err
	}
	extra, err := t.turnTools(ctx, selected)
	if err != nil {
		return err
	}
	selected = append(selected[:len(selected):len(selected)], extra...)
	t.offered = make(map[string]bool, len(selected))
	var llmTools []llm.Tool
	for _, tool := range selected {
		t.offered[tool.Name] = true
		llmTools = append(llmTools, t.llmTool(tool))
	}

	kind := sess.Key.Kind()
	minimal := minimalMode(cfg, kind)
	p := Prompt{
		Agent:    cfg.Prompt,
		Skills:   cmp.Or(cfg.SkillIndex, skills.Index(t.skills)),
		Now:      t.r.now(),
		Location: cfg.Location,
		Surface:  sess.Key.Surface,
		Tools:    selected,
		Minimal:  minimal,
	}
	if !minimal {
		p.Workspace = t.r.workspaceInstructions(ctx, cfg.WorkspaceDir)
	}
	if kind == "channel" {
		p.DisplayName = displayName(t.req.Inputs)
	}
	t.call = llm.Request{
		Model:           name,
		System:          BuildSystemPrompt(p),
		Tools:           llmTools,
		MaxTokens:       cfg.MaxOutputTokens,
		ReasoningEffort: resolveEffort(t.req.Inputs, sess, cfg.ReasoningEffort),
	}
	t.digest = PromptDigest(t.call.System)
	if t.side != nil {
		t.call.Temperature = t.side.Temperature
		if t.side.MaxTokens > 0 {
			t.call.MaxTokens = t.side.MaxTokens
		}
	}
	return t.loadHistory()
}

// selectTools picks the tools the model is offered and the registry that
// runs them: the agent's own from the runner's registry, or a side turn's,
// registered on a registry of their own.
func (t *turn) selectTools() ([]tools.Tool, error) {
	if t.side == nil {
		t.reg = t.r.opts.Tools
		selected, err := t.reg.Select(t.req.Agent.Tools)
		if err != nil {
			return nil, fmt.Errorf("select tools for agent %s: %w", t.req.Agent.ID, err)
		}
		return selected, nil
	}
	reg, err := sideRegistry(t.side.Tools)
	if err != nil {
		return nil, err
	}
	t.reg = reg
	return t.side.Tools, nil
}

// loadHistory reads the live context into the prompt: the latest summary
// and what follows it, never the archive. Side turns' messages are left
// out; a side turn's own prompt goes last.
func (t *turn) loadHistory() error {
	turns := cmp.Or(max(t.req.Agent.HistoryTurns, 0), sessions.DefaultHistoryTurns(t.req.Session.Key.Kind()))
	// Only what the prompt can hold is read: the summary and the last
	// turns, however long the live context has grown. A short session is
	// read whole: one plain query is cheaper than finding where its last
	// turns begin.
	opts := sessions.MessagesOptions{}
	if t.req.Session.MessageCount > int64(4*turns) {
		opts.Turns = turns
	}
	if n := len(t.res.Messages); n > 0 && t.side == nil && !t.historyRead {
		// Right after storing the turn's input: as that append left the
		// session, which the store may already hold.
		opts.AfterAppend = t.res.Messages[n-1].ID
	}
	t.historyRead = true
	_, span := telemetry.Start(t.pctx, telemetry.SpanHistory, telemetry.KindInternal)
	stored, err := t.r.opts.Store.Messages(t.pctx, t.id, opts)
	span.Int("parley.history.messages", int64(len(stored)))
	span.Fail(err)
	span.End()
	if err != nil {
		return fmt.Errorf("load history of session %s: %w", t.id, err)
	}
	t.history = withoutSide(stored)
	capped := capTurns(t.history, turns)
	t.call.Messages = toLLMWith(capped, &t.r.rendered)
	omitToolResults(t.call.Messages, t.req.Agent.OmitToolResults)
	t.attachImages()
	t.attachStoredImages(capped)
	if t.side != nil {
		t.call.Messages = append(t.call.Messages, llm.Message{Role: llm.RoleUser, Content: t.side.Prompt})
	}
	return nil
}

// attachImages gives this run's user messages their images. They are the
// last user messages of the prompt, in input order.
func (t *turn) attachImages() {
	if t.side != nil {
		return
	}
	in := len(t.req.Inputs) - 1
	for i := len(t.call.Messages) - 1; i >= 0 && in >= 0; i-- {
		if t.call.Messages[i].Role != llm.RoleUser {
			continue
		}
		if imgs := t.req.Inputs[in].Images; len(imgs) > 0 {
			t.call.Messages[i].Images = imgs
		}
		in--
	}
}

// compactBefore compacts the session when the prompt, with the new
// messages, reaches the compaction threshold of the model the turn runs on
// (a smaller model than the agent's own forces it sooner), and fails the
// turn if the history still does not fit that model. It never truncates.
func (t *turn) compactBefore(ctx context.Context) error {
	if t.r.opts.Compactor == nil || t.side != nil || t.window <= 0 {
		return nil
	}
	limit := Threshold(t.req.Agent, t.window)
	used := t.contextUsed()
	if used < limit {
		return nil
	}
	t.compacted = true
	st := t.r.statuses.Get(t.id)
	st.State, st.Message = StateBusy, compactingMessage
	t.publish(EventStatusChanged, st)
	if t.req.OnStatus != nil {
		t.req.OnStatus(st)
	}
	res, err := t.r.compact(ctx, t, CompactBeforeTurn, used, limit)
	t.publish(EventStatusChanged, t.r.statuses.Get(t.id))
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// Compaction left the session as it was; the turn goes on if it fits.
		t.r.log.WarnContext(ctx, "compaction before the turn failed", "session_id", t.id, "error", err)
		res.Skipped = err.Error()
	}
	if res.Notice != "" {
		t.res.Notices = append(t.res.Notices, res.Notice)
	}
	if res.Compacted {
		if err := t.loadHistory(); err != nil {
			return err
		}
		used = t.contextUsed()
	}
	if used > int64(t.window) {
		why := "after compaction"
		if !res.Compacted {
			why = "and it could not be compacted (" + cmp.Or(res.Skipped, "no reason given") + ")"
		}
		return fmt.Errorf("%w: about %d tokens against the %d-token window of %s, %s; send /reset to start a new session, or branch from an earlier message",
			ErrContextFull, used, t.window, t.spec, why)
	}
	return nil
}

// contextUsed estimates the tokens of the prompt: the context the provider
// reported for the latest reply plus what was added since, or the
// heuristic estimate of the (pruned) prompt when there is no such report
// or a compaction came after it.
func (t *turn) contextUsed() int64 {
	var latestSummary sessions.MessageID
	for _, m := range t.history {
		if m.Summary && m.ID > latestSummary {
			latestSummary = m.ID
		}
	}
	for i := len(t.history) - 1; i >= 0; i-- {
		m := t.history[i]
		if m.Role != sessions.RoleAssistant || m.Usage == nil || m.Usage.Context() <= 0 {
			continue
		}
		// Ids are UUIDv7, in creation order: a reply older than the latest
		// summary reported the context from before that compaction.
		if m.ID < latestSummary {
			break
		}
		n := m.Usage.Context()
		for _, later := range t.history[i+1:] {
			n += later.TokenEstimate
		}
		return n
	}
	call := t.call
	call.Messages, _ = t.prune(call)
	return EstimateRequestTokens(call)
}

// prune applies tool-output pruning to a call's messages (a view only).
func (t *turn) prune(call llm.Request) ([]llm.Message, PruneStats) {
	lim, window := DefaultPruneLimits, t.window
	if t.aggressive {
		lim = AggressivePruneLimits
		if window <= 0 {
			window = int(EstimateRequestTokens(call))
		}
	}
	return PruneToolOutputs(call, window, lim)
}

// callModel makes one model call. When the provider says the prompt does
// not fit, it prunes tool outputs aggressively and tries once more.
func (t *turn) callModel(ctx context.Context) (llm.Response, error) {
	resp, err := t.stream(ctx)
	// A model that failed in a way another may not (after its own
	// retries) hands the call to the agent's fallbacks, in order; the one
	// that answers answers the rest of the turn.
	for err != nil && ctx.Err() == nil && resp.Text == "" && len(resp.ToolCalls) == 0 && fallbackWorthy(err) && t.fallback < len(t.req.Agent.FallbackModels) {
		spec := t.req.Agent.FallbackModels[t.fallback]
		t.fallback++
		model, name, merr := t.r.model(t.id, spec, t.req.OnStatus)
		if merr != nil {
			t.r.log.WarnContext(ctx, "fallback model can't be opened", "session_id", t.id, "model", spec, "error", merr)
			continue
		}
		t.r.log.WarnContext(ctx, "model failed; its fallback answers", "session_id", t.id, "model", t.spec, "fallback", spec, "error", err)
		failed := t.spec
		t.publish(EventModelFallback, ModelFallback{AgentID: t.req.Agent.ID, Model: failed, Fallback: spec})
		t.model, t.spec, t.call.Model = model, spec, name
		t.r.statuses.update(t.id, func(s *Status) {
			s.State, s.Message = StateBusy, "answering with fallback model "+spec+" ("+failed+" failed)"
		})
		resp, err = t.stream(ctx)
	}
	if err == nil || t.aggressive || !errors.Is(err, llm.ErrContextLength) || ctx.Err() != nil ||
		resp.Text != "" || len(resp.ToolCalls) > 0 {
		return resp, err
	}
	t.aggressive = true
	t.r.log.WarnContext(ctx, "prompt too long for the model; pruning tool outputs harder and retrying",
		"session_id", t.id, "model", t.spec, "error", err)
	resp, err = t.stream(ctx)
	if err != nil && errors.Is(err, llm.ErrContextLength) {
		err = fmt.Errorf("%w (even with long tool outputs pruned; /compact summarizes the conversation, /reset starts a new one)", err)
	}
	return resp, err
}

func (t *turn) stream(ctx context.Context) (llm.Response, error) {
	call := t.call
	msgs, pruned := t.prune(call)
	if pruned.Trimmed+pruned.Cleared == 0 {
		// The model's view ends at its length: the turn's appends to its
		// own messages can't reach it. (Pruning copies what it changes.)
		msgs = msgs[:len(msgs):len(msgs)]
	} else {
		t.r.log.DebugContext(ctx, "tool outputs pruned for the prompt", "session_id", t.id, "trimmed", pruned.Trimmed,
			"cleared", pruned.Cleared, "tokens_before", pruned.Before, "tokens_after", pruned.After)
	}
	call.Messages = msgs
	ctx, span := t.traceCall(ctx, call)
	first := span.On() // the first token's moment is wanted
	resp, err := t.model.Stream(llm.WithCallTimeouts(ctx, t.req.Agent.Timeouts), call, func(d llm.Delta) {
		if first && (d.Text != "" || d.ToolCallStarted != nil) {
			first = false
			span.FirstToken(time.Now())
		}
		if d.Text != "" {
			t.publish(EventMessageDelta, d.Text)
			if t.req.OnText != nil && t.side == nil {
				t.req.OnText(d.Text)
			}
		}
	})
	span.end(resp, err)
	recovered, st := false, Status{}
	t.r.statuses.update(t.id, func(s *Status) {
		if s.State == StateRetrying {
			s.State, s.Attempt, s.Message = StateBusy, 0, ""
			recovered, st = true, *s
		}
	})
	if recovered {
		t.publish(EventStatusChanged, st)
	}
	return resp, err
}

// fail records what a failed model call left, truthfully, and returns the
// error: an abort when ctx ended, the model's error otherwise.
func (t *turn) fail(ctx context.Context, resp llm.Response, err error) (Result, error) {
	aborted := ctx.Err() != nil || errors.Is(err, context.Canceled)
	result := tools.Failed(errModelCallFailed)
	if aborted {
		result = tools.Aborted(abortedText(ctx), ctx.Err())
	}
	if resp.Text != "" || len(resp.ToolCalls) > 0 {
		if aerr := t.appendAssistant(resp); aerr != nil {
			return t.res, errors.Join(err, aerr)
		}
		results := make([]tools.Result, len(resp.ToolCalls))
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

// userMessage is in as the turn stores it: a turn's own input (not a side
// turn's) records the model and reasoning effort the turn runs with.
func (t *turn) userMessage(in Input) sessions.Message {
	m := sessions.Message{ID: in.ID, Role: sessions.RoleUser, Content: in.Text, Parts: in.Parts, Synthetic: in.Synthetic}
	if t.side != nil {
		return m
	}
	spec := resolveModel(t.req.Inputs, t.req.Session, t.req.Agent.Model, t.r.opts.DefaultModel)
	m.Model = spec
	m.Parts = append(m.Parts[:len(m.Parts):len(m.Parts)],
		turnPart(TurnSettings{Model: spec, ReasoningEffort: resolveEffort(t.req.Inputs, t.req.Session, t.req.Agent.ReasoningEffort)}))
	return m
}

func (t *turn) steer() error {
	if t.req.Steer == nil {
		return nil
	}
	joined := t.req.Steer()
	ids := runIDs(joined)
	// The turn answers them from here, even if storing one fails.
	t.joined = append(t.joined, ids...)
	for _, in := range joined {
		if err := t.appendInput(in); err != nil {
			return err
		}
		t.call.Messages = append(t.call.Messages, llm.Message{Role: llm.RoleUser, Content: userContent(in.Text, in.Parts)})
	}
	if len(ids) > 0 {
		t.publish(EventTurnJoined, TurnJoined{RunIDs: ids})
	}
	return nil
}

// runTools runs one step's calls concurrently, at most MaxParallelTools at
// once, and returns their results in call order.
func (t *turn) runTools(ctx context.Context, calls []llm.ToolCall) []tools.Result {
	results := make([]tools.Result, len(calls))
	sem := make(chan struct{}, MaxParallelTools)
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				results[i] = tools.Aborted(abortedText(ctx), ctx.Err())
				return
			}
			results[i] = t.runTool(ctx, c)
		})
	}
	wg.Wait()
	return results
}

func (t *turn) runTool(ctx context.Context, c llm.ToolCall) tools.Result {
	t.publish(EventToolStarted, ToolEvent{CallID: c.ID, Name: c.Name})
	res := t.toolResult(ctx, c)
	ev := ToolEvent{CallID: c.ID, Name: c.Name, Result: res.Content, IsError: res.IsError}
	if len(res.Attempts) > 0 {
		ev.Attempts = len(res.Attempts) + 1
	}
	t.publish(EventToolCompleted, ev)
	return res
}

// toolResult runs one call through the registry, the one door every tool
// call passes; a name the agent was not offered is unknown to it.
func (t *turn) toolResult(ctx context.Context, c llm.ToolCall) tools.Result {
	if !t.offered[c.Name] {
		return tools.Failed(fmt.Errorf("%w %s", tools.ErrUnknownTool, c.Name))
	}
	res := t.registryFor(c.Name).Call(ctx, tools.Call{Name: c.Name, SessionID: t.id, Key: t.req.Session.Key, ID: c.ID, Arguments: c.Arguments,
		Origin: t.origin(), Attach: t.attach, Retrying: func(failed tools.Attempt, wait time.Duration) {
			t.publish(EventToolRetrying, ToolEvent{CallID: c.ID, Name: c.Name, Retry: &failed, Wait: wait})
		}})
	var pe *tools.PanicError
	switch {
	case errors.As(res.Err, &pe):
		t.r.log.ErrorContext(ctx, "tool panicked", "session_id", t.id, "tool", c.Name, "panic", pe.Value, "stack", string(pe.Stack))
	case errors.Is(res.Err, tools.ErrAborted):
		// The turn says what ended it (a subagent's parent, say).
		res.Content = abortedText(ctx)
	}
	return res
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

// appendReply stores the turn's reply, the model's last answer, which
// calls no tools. With Request.Finish, what the caller records of the
// turn's outcome commits in the same transaction.
func (t *turn) appendReply(resp llm.Response) error {
	if t.req.Finish == nil || !t.req.DeferCompaction || t.side != nil {
		return t.appendAssistant(resp)
	}
	m, am := assistantMessage(resp, t.spec, t.digest)
	m = t.marked(m)
	stored, err := t.r.opts.Store.AppendWith(t.pctx, t.id, m, func(ctx context.Context, q dbutil.Querier, stored sessions.Message) error {
		res := t.res
		res.Messages = append(res.Messages[:len(res.Messages):len(res.Messages)], stored)
		res.Finished = true
		return t.req.Finish(ctx, q, res)
	})
	if err != nil {
		return fmt.Errorf("append %s message to session %s: %w", m.Role, t.id, err)
	}
	t.res.Messages = append(t.res.Messages, stored)
	t.res.Finished = true
	t.call.Messages = append(t.call.Messages, am)
	return nil
}

// assistantMessage is resp as stored and as the model sees it next; digest
// is the system prompt's (PromptDigest), recorded in its metadata.
func assistantMessage(resp llm.Response, spec, digest string) (sessions.Message, llm.Message) {
	u := sessions.Usage{Input: resp.Usage.Input, Output: resp.Usage.Output, Reasoning: resp.Usage.Reasoning,
		CacheRead: resp.Usage.CacheRead, CacheWrite: resp.Usage.CacheWrite}
	m := sessions.Message{Role: sessions.RoleAssistant, Content: resp.Text, Model: spec, Usage: &u}
	if digest != "" {
		m.Metadata = json.RawMessage(`{"system_prompt_digest":"` + digest + `"}`)
	}
	am := llm.Message{Role: llm.RoleAssistant, Content: resp.Text, Thinking: resp.Thinking}
	for _, c := range resp.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, sessions.ToolCall{ID: c.ID, Name: c.Name, Arguments: storableArgs(c.Arguments)})
		am.ToolCalls = append(am.ToolCalls, c)
	}
	return m, am
}

func (t *turn) appendAssistant(resp llm.Response) error {
	m, am := assistantMessage(resp, t.spec, t.digest)
	if err := t.append(m); err != nil {
		return err
	}
	t.call.Messages = append(t.call.Messages, am)
	return nil
}

func (t *turn) appendResults(calls []llm.ToolCall, results []tools.Result) error {
	for i, c := range calls {
		content := results[i].Content
		m := sessions.Message{Role: sessions.RoleTool, Content: content, ToolCallID: c.ID}
		if tried := results[i].Attempts; len(tried) > 0 {
			// The failed tries before this result, kept with it.
			m.Metadata, _ = json.Marshal(map[string]any{"attempts": tried})
		}
		if err := t.append(m); err != nil {
			return err
		}
		t.call.Messages = append(t.call.Messages, llm.Message{Role: llm.RoleTool, Content: content, ToolCallID: c.ID})
	}
	return nil
}

// attach adds a part to the turn's reply (tools.Call.Attach).
func (t *turn) attach(p sessions.Part) {
	t.attachMu.Lock()
	defer t.attachMu.Unlock()
	t.attached = append(t.attached, p)
}

// publish publishes a turn event; a side turn's stay private.
func (t *turn) publish(typ events.Type, data any) {
	if t.side == nil {
		t.r.publish(t.id, typ, data)
	}
}

// appendInput stores one of the turn's user messages.
func (t *turn) appendInput(in Input) error {
	if err := t.append(t.userMessage(in)); err != nil {
		return err
	}
	t.answering = append(t.answering, string(t.res.Messages[len(t.res.Messages)-1].ID))
	return nil
}

// marked is m as the turn stores it: a side turn's messages are marked
// so, and a reply (an assistant message that calls no tools) says which
// messages it answers (PartAnswers).
func (t *turn) marked(m sessions.Message) sessions.Message {
	if t.side == nil && m.Role == sessions.RoleAssistant && len(m.ToolCalls) == 0 {
		t.attachMu.Lock()
		m.Parts = append(m.Parts[:len(m.Parts):len(m.Parts)], t.attached...)
		t.attachMu.Unlock()
	}
	switch {
	case t.side != nil:
		m.Synthetic = true
		m.Parts = append(m.Parts, sessions.Part{Type: PartSideTurn, Name: t.side.Name})
	case m.Role == sessions.RoleAssistant && len(m.ToolCalls) == 0 && len(t.answering) > 0:
		m.Parts = append(m.Parts, sessions.Part{Type: PartAnswers, Name: strings.Join(t.answering, " ")})
	}
	return m
}

func (t *turn) append(m sessions.Message) error {
	m = t.marked(m)
	stored, err := t.r.opts.Store.Append(t.pctx, t.id, m)
	if err != nil {
		return fmt.Errorf("append %s message to session %s: %w", m.Role, t.id, err)
	}
	t.res.Messages = append(t.res.Messages, stored)
	return nil
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

// fallbackWorthy says whether another model may answer where this one
// failed: a server error, an overload or rate limit left after retries, a
// timeout, a connection that failed. A refused request (a bad key, a prompt
// too long) would fail the same way elsewhere in the agent's setup.
func fallbackWorthy(err error) bool {
	return llm.Retryable(err) || errors.Is(err, context.DeadlineExceeded)
}
