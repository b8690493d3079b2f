package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/telemetry"
	"github.com/parleyd/parley/tools"
)

// Compaction limits.
const (
	// MaxOutputReserve caps the room kept free for the reply: a session is
	// also compacted at window - min(MaxOutputReserve, max output tokens).
	MaxOutputReserve = 20_000
	// forecastTurns is how many recent turns the forecast averages.
	forecastTurns = 5
)

// PartSideTurn is the part type that marks a side turn's messages (the
// memory flush): they are stored, synthetic, and never sent in a prompt
// again. The part's Name says which side turn wrote them.
const PartSideTurn = "side_turn"

// PartAnswers marks a turn's reply (an assistant message that calls no
// tools) with the user messages it answers: the part's Name lists their
// ids, space-separated, in the order the turn took them. Recovery reads it
// (Runner.Answered): a message is answered only by a reply stored for it,
// never by a later turn's reply to a newer message.
const PartAnswers = "answers"

var (
	// ErrContextFull means the conversation does not fit the context window
	// of the model the turn would use, even after compaction.
	ErrContextFull = errors.New("the conversation does not fit the model's context window")
	// ErrNoCompactor means compaction was asked for but none is configured.
	ErrNoCompactor = errors.New("compaction is not configured")
)

// CompactionConfig is an agent's compaction settings.
type CompactionConfig struct {
	// Threshold is the share of MaxContextTokens at which the session is
	// compacted; 0 means config.DefaultCompactionThreshold.
	Threshold float64
	// Model writes the summary (a cheaper model); "" means the agent's own.
	Model string
	// Notify asks for a one-line notice to the user when compaction ran
	// (Result.Notices, CompactionResult.Notice).
	Notify bool
	// TailTurns is how many of the latest turns stay as they are; 0 means
	// the compactor's default.
	TailTurns int
	// TailBudgetPct caps the kept turns' share, in percent, of the usable
	// window (Window less Reserve); 0 means the compactor's default.
	TailBudgetPct int
	// SummaryMaxTokens caps the summary; 0 means the compactor's default.
	SummaryMaxTokens int
	// ReserveTokens is the room kept for the reply; 0 means
	// min(MaxOutputReserve, MaxOutputTokens).
	ReserveTokens int
	// Retries is how often a failed summary is tried again; nil means the
	// compactor's policy.
	Retries *int
	// FlushTimeout and SummaryTimeout bound the memory flush and the
	// summary (retries included); 0 means the compactor's defaults.
	FlushTimeout, SummaryTimeout time.Duration
}

// CompactWhen says what set a compaction off.
type CompactWhen string

const (
	CompactBeforeTurn CompactWhen = "before_turn"
	CompactAfterTurn  CompactWhen = "after_turn"
	CompactManual     CompactWhen = "manual"
)

// Compactor shortens a session's live context: a memory flush, a summary of
// the older messages, and archiving them (memory.Compactor). The runner
// decides when, on the session's lane, and calls it; it never runs beside a
// turn of the same session.
type Compactor interface {
	// Compact compacts req.Session. A compaction that could not run for a
	// reason the turn can live with (too few messages, the summarizer
	// failing after its retries) is reported in the result with a nil
	// error, except for CompactManual, where it is an error. It must leave
	// the session unchanged when it fails.
	Compact(ctx context.Context, req CompactionRequest) (CompactionResult, error)
}

// CompactionRequest is what the runner tells its Compactor.
type CompactionRequest struct {
	When    CompactWhen
	Session sessions.Session
	Agent   AgentConfig
	// Model is the spec of the model the turn runs on (the agent's own for
	// after-turn and manual compactions), and Window its context window.
	Model  string
	Window int
	// Used is the estimated context in tokens, and Threshold the trigger it
	// was measured against.
	Used, Threshold int64
	// SummaryModel writes the summary: the agent's compaction model, or its
	// own. SummaryWindow is its context window (0 if unknown).
	SummaryModel  string
	SummaryWindow int
	// Side runs a side turn in the session (the memory flush) on the
	// caller's lane, without taking the session's run slot, which the
	// caller already holds.
	Side func(ctx context.Context, st SideTurn) (Result, error)
}

// CompactionResult is what a compaction did.
type CompactionResult struct {
	Compacted bool
	// Skipped says why nothing was compacted, when Compacted is false.
	Skipped string
	// SummaryID is the summary message, and the compaction id of every
	// message it archived.
	SummaryID sessions.MessageID
	// Summarized counts the conversation messages the summary replaced;
	// Archived everything moved to the archive (with the flush's messages).
	Summarized, Archived int
	// Memories counts the memories the flush saved.
	Memories int
	// TokensBefore and TokensAfter are the session's token_count rollup.
	TokensBefore, TokensAfter int64
	Duration                  time.Duration
	// Notice is the one-line notice for the user, when the agent asks for
	// one (CompactionConfig.Notify).
	Notice string
	// SummarizedTurns counts the user messages the summary replaced, the
	// first and last quoted (a short excerpt) in SummarizedFrom and
	// SummarizedTo; KeptTurns and KeptMessages count what was kept as it
	// is, from the user message quoted in KeptFrom.
	SummarizedTurns              int
	SummarizedFrom, SummarizedTo string
	KeptTurns, KeptMessages      int
	KeptFrom                     string
}

// SideTurn is a restricted turn a Compactor runs in the session: one
// synthetic user message (Prompt) and only Tools. Every message it stores is
// synthetic and carries a PartSideTurn part named Name, so later prompts
// leave it out. It publishes no events and never compacts.
type SideTurn struct {
	Name        string
	Prompt      string
	Tools       []tools.Tool
	Temperature *float64
	// MaxTokens caps each model call's output; 0 means the agent's.
	MaxTokens int
	// MaxSteps caps the model calls; 0 means the agent's.
	MaxSteps int
}

// Forecast is how close a session is to compaction, for /status.
type Forecast struct {
	// Used is the estimated context in tokens; Threshold is where
	// compaction fires (0 when the context window is unknown); Window is
	// the model's context window.
	Used, Threshold int64
	Window          int
	// TurnsLeft is about how many turns of the recent average size fit
	// before compaction; -1 when there is no turn to average yet or the
	// window is unknown.
	TurnsLeft int
}

// Threshold is the context size, in tokens, at which a session on a model
// with the given window is compacted: the agent's threshold share of the
// window, or the window less the room kept for the reply, whichever is
// lower. 0 means unknown (no automatic compaction).
func Threshold(cfg AgentConfig, window int) int64 {
	if window <= 0 {
		return 0
	}
	share := cfg.Compaction.Threshold
	if share <= 0 {
		share = config.DefaultCompactionThreshold
	}
	return max(0, min(int64(share*float64(window)), int64(window-Reserve(cfg))))
}

// Reserve is the room, in tokens, kept free of history for the reply:
// the agent's ReserveTokens, or min(MaxOutputReserve, MaxOutputTokens).
func Reserve(cfg AgentConfig) int {
	if cfg.Compaction.ReserveTokens > 0 {
		return cfg.Compaction.ReserveTokens
	}
	return min(MaxOutputReserve, cmp.Or(max(cfg.MaxOutputTokens, 0), config.DefaultMaxOutputTokens))
}

// knownWindows are context windows of well-known models, for a per-message
// or per-session model override; the agent's own model uses the configured
// max_context_tokens. Longer prefixes come first.
var knownWindows = []struct {
	prefix string
	tokens int
}{
	{"gpt-4.1", 1_047_576},
	{"gpt-4o", 128_000},
	{"gpt-4-turbo", 128_000},
	{"gpt-3.5-turbo", 16_385},
	{"o4-mini", 200_000},
	{"o3", 200_000},
	{"o1", 200_000},
	{"claude-", 200_000},
}

// KnownContextWindow is the context window of a well-known model name (the
// provider's own name, e.g. "gpt-4o-mini"), or 0.
func KnownContextWindow(name string) int {
	for _, k := range knownWindows {
		if strings.HasPrefix(name, k.prefix) {
			return k.tokens
		}
	}
	return 0
}

// contextWindow is the context window of spec for an agent whose own model
// is own: the configured MaxContextTokens for its own model; for another,
// Options.ContextWindow, then the known-models table, then the configured
// value again.
func (r *Runner) contextWindow(spec, own string, cfg AgentConfig) int {
	if spec == own && cfg.MaxContextTokens > 0 {
		return cfg.MaxContextTokens
	}
	if r.opts.ContextWindow != nil {
		if n := r.opts.ContextWindow(spec); n > 0 {
			return n
		}
	}
	if _, name, err := llm.ParseModel(spec); err == nil {
		if n := KnownContextWindow(name); n > 0 {
			return n
		}
	}
	return max(cfg.MaxContextTokens, 0)
}

// ownModel is the model spec the agent uses when no message overrides it.
func (r *Runner) ownModel(sess sessions.Session, cfg AgentConfig) string {
	return resolveModel(nil, sess, cfg.Model, r.opts.DefaultModel)
}

// acquire takes the session's run slot, so Abort can cancel what runs.
func (r *Runner) acquire(ctx context.Context, id sessions.ID) (context.Context, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	if _, busy := r.running[id]; busy {
		r.mu.Unlock()
		cancel()
		return nil, nil, ErrBusy
	}
	r.running[id] = cancel
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.running, id)
		r.mu.Unlock()
		cancel()
	}, nil
}

// view is a turn prepared only to measure the session's context: nothing is
// stored and no model is opened.
func (r *Runner) view(ctx context.Context, sess sessions.Session, cfg AgentConfig) (*turn, error) {
	t := &turn{r: r, req: Request{Session: sess, Agent: cfg}, id: sess.ID, pctx: context.WithoutCancel(ctx)}
	if err := t.prepare(ctx, false); err != nil {
		return nil, err
	}
	return t, nil
}

// Compact compacts a session now (/compact, `parley sessions compact`),
// whatever its size, on the runner's slot for the session: ErrBusy while a
// turn runs. Fewer messages than compaction needs is an error that says so.
func (r *Runner) Compact(ctx context.Context, sess sessions.Session, cfg AgentConfig) (CompactionResult, error) {
	if r.opts.Compactor == nil {
		return CompactionResult{}, ErrNoCompactor
	}
	ctx, release, err := r.acquire(ctx, sess.ID)
	if err != nil {
		return CompactionResult{}, err
	}
	defer release()
	t, err := r.view(ctx, sess, cfg)
	if err != nil {
		return CompactionResult{}, err
	}
	used := t.contextUsed()
	return r.compact(ctx, t, CompactManual, used, Threshold(cfg, t.window))
}

// AfterTurn runs the after-turn compaction check for a run made with
// Request.DeferCompaction, once its reply is on its way; call it on the
// session's lane. Run does it itself otherwise.
func (r *Runner) AfterTurn(ctx context.Context, req Request) (CompactionResult, error) {
	if r.opts.Compactor == nil {
		return CompactionResult{}, nil
	}
	ctx, release, err := r.acquire(ctx, req.Session.ID)
	if err != nil {
		return CompactionResult{}, err
	}
	defer release()
	return r.afterTurn(ctx, req)
}

func (r *Runner) afterTurn(ctx context.Context, req Request) (CompactionResult, error) {
	t, err := r.view(ctx, req.Session, req.Agent)
	if err != nil {
		return CompactionResult{}, err
	}
	limit := Threshold(req.Agent, t.window)
	used := t.contextUsed()
	if limit <= 0 || used < limit {
		return CompactionResult{}, nil
	}
	return r.compact(ctx, t, CompactAfterTurn, used, limit)
}

// Forecast says how close a session is to compaction: the context used,
// the threshold, and about how many turns of the recent average size fit
// before it.
func (r *Runner) Forecast(ctx context.Context, sess sessions.Session, cfg AgentConfig) (Forecast, error) {
	t, err := r.view(ctx, sess, cfg)
	if err != nil {
		return Forecast{}, err
	}
	f := Forecast{Used: t.contextUsed(), Threshold: Threshold(cfg, t.window), Window: t.window, TurnsLeft: -1}
	if avg := averageTurn(t.history); avg > 0 && f.Threshold > 0 {
		f.TurnsLeft = int(max(0, (f.Threshold-f.Used)/avg))
	}
	return f, nil
}

// averageTurn is the average tokens per turn over the last few user turns.
func averageTurn(msgs []sessions.Message) int64 {
	turns, start := 0, -1
	for i := len(msgs) - 1; i >= 0 && turns < forecastTurns; i-- {
		if msgs[i].Role == sessions.RoleUser && !msgs[i].Synthetic {
			turns, start = turns+1, i
		}
	}
	if turns == 0 {
		return 0
	}
	var n int64
	for _, m := range msgs[start:] {
		n += m.TokenEstimate
	}
	return max(1, n/int64(turns))
}

// compactingMessage is the status message while a compaction runs.
const compactingMessage = "compacting the conversation"

// compact calls the Compactor for t's session, showing it on the status board.
func (r *Runner) compact(ctx context.Context, t *turn, when CompactWhen, used, limit int64) (CompactionResult, error) {
	sess, cfg := t.req.Session, t.req.Agent
	own := r.ownModel(sess, cfg)
	summary := cmp.Or(cfg.Compaction.Model, own)
	req := CompactionRequest{
		When: when, Session: sess, Agent: cfg, Model: t.spec, Window: t.window, Used: used, Threshold: limit,
		SummaryModel: summary, SummaryWindow: r.contextWindow(summary, own, cfg),
		Side: func(ctx context.Context, st SideTurn) (Result, error) { return r.runSide(ctx, sess, cfg, st) },
	}
	prev := r.statuses.Get(sess.ID)
	r.statuses.update(sess.ID, func(s *Status) {
		s.State, s.Message = StateBusy, compactingMessage
	})
	defer r.statuses.set(sess.ID, prev)
	ctx, span := telemetry.Start(ctx, telemetry.SpanCompaction, telemetry.KindInternal)
	defer span.End()
	span.Str("parley.compaction.trigger", string(when))
	res, err := r.opts.Compactor.Compact(ctx, req)
	span.Fail(err)
	span.Bool("parley.compaction.compacted", res.Compacted)
	span.Int("parley.compaction.tokens_before", int64(res.TokensBefore))
	span.Int("parley.compaction.tokens_after", int64(res.TokensAfter))
	if err == nil && res.Compacted {
		r.log.InfoContext(ctx, "session compacted", "session_id", sess.ID, "trigger", string(when),
			"archived", res.Archived, "tokens_before", res.TokensBefore, "tokens_after", res.TokensAfter)
	}
	return res, err
}

// runSide runs a side turn in sess (see SideTurn).
func (r *Runner) runSide(ctx context.Context, sess sessions.Session, cfg AgentConfig, st SideTurn) (Result, error) {
	t := &turn{r: r, id: sess.ID, pctx: context.WithoutCancel(ctx), side: &st,
		req: Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: st.Prompt, Synthetic: true}}}}
	return t.run(ctx)
}

// sideRegistry registers a side turn's tools on a registry of their own,
// so their calls go through Registry.Call like every other.
func sideRegistry(ts []tools.Tool) (*tools.Registry, error) {
	reg := tools.NewRegistry()
	for _, t := range ts {
		if t.Name == "" || t.Run == nil {
			return nil, fmt.Errorf("%w: a side turn's tool needs a name and a Run function", tools.ErrInvalidTool)
		}
		if err := reg.Register(t); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// isSide reports whether m was written by a side turn. It takes a
// pointer and indexes the parts: each turn asks it of every message of
// its history, and a copy of each message and part would cost more than
// the check.
func isSide(m *sessions.Message) bool {
	for i := range m.Parts {
		if m.Parts[i].Type == PartSideTurn {
			return true
		}
	}
	return false
}

// withoutSide drops side-turn messages, which no prompt shows again.
func withoutSide(msgs []sessions.Message) []sessions.Message {
	for i := range msgs {
		if !isSide(&msgs[i]) {
			continue
		}
		out := append(make([]sessions.Message, 0, len(msgs)), msgs[:i]...)
		for j := i + 1; j < len(msgs); j++ {
			if !isSide(&msgs[j]) {
				out = append(out, msgs[j])
			}
		}
		return out
	}
	return msgs
}
