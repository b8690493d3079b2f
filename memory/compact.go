package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/textcut"
	"github.com/parleyd/parley/tools"
)

// EventContextCompacted is published after a compaction commits.
const EventContextCompacted events.Type = "context.compacted" // Data: ContextCompacted

// MinLiveMessages is the fewest live messages a session needs before it
// is compacted. The defaults of an agent's compaction settings left zero
// (agent.CompactionConfig) are the config's (config.DefaultTailTurns and
// the rest), written once there.
const MinLiveMessages = 6

// excerptRunes is how much of a message /compact quotes.
const excerptRunes = 40

// FlushTurnName names the memory flush's side turn; its messages carry an
// agent.PartSideTurn part with this name.
const FlushTurnName = "memory_flush"

// FlushPrompt is the flush turn's instruction.
const FlushPrompt = "The conversation is about to be compacted: the older messages will be replaced by a short summary. " +
	"Before that happens, save any important information you will need later with memory_write: facts about the user, " +
	"preferences, names, decisions, commitments and open tasks, one fact per call. Don't save what is already saved or " +
	"what only mattered for a moment. When you are done, or if there is nothing worth saving, reply with just: done."

const (
	flushTemperature = 0.3
	flushMaxTokens   = 2048
	flushMaxSteps    = 4
)

// ContextCompacted is the data of a context.compacted event.
type ContextCompacted struct {
	SessionID sessions.ID
	// SummaryID is the summary message, and the compaction id of what it
	// archived.
	SummaryID sessions.MessageID
	Trigger   agent.CompactWhen
	// Summarized counts the conversation messages the summary replaced,
	// Archived every message moved to the archive (the flush's included),
	// Memories the memories the flush saved.
	Summarized, Archived, Memories int
	// TokensBefore and TokensAfter are the session's token_count rollup.
	TokensBefore, TokensAfter int64
	Duration                  time.Duration
	// Model wrote the summary, using Usage (the memory flush's usage is on
	// its own messages).
	Model string
	Usage *sessions.Usage
}

// SessionStore is what compaction needs of the session store
// (*sessions.SQLStore).
type SessionStore interface {
	Messages(ctx context.Context, id sessions.ID, opts sessions.MessagesOptions) ([]sessions.Message, error)
	Compact(ctx context.Context, id sessions.ID, in sessions.CompactInput) (sessions.CompactResult, error)
}

// CompactorOptions configures a Compactor.
type CompactorOptions struct {
	Sessions SessionStore
	// Memory keeps what the flush saves and indexes each summary; nil means
	// no flush and no index.
	Memory *Store
	// Models opens the summarizer's model by spec, as the runner's do.
	Models func(spec string) (llm.Model, error)
	Bus    *events.Bus
	Log    *slog.Logger
	Now    func() time.Time
	// Retry is the summarizer's retry policy. MaxAttempts defaults to 3: a
	// transient failure is retried twice, with backoff.
	Retry llm.RetryPolicy
}

// Compactor is the agent.Compactor: a memory flush, a summary of the older
// messages, then archiving them and storing the summary (and its memory
// item) in one transaction. It holds no state of its own between calls.
type Compactor struct {
	opts CompactorOptions
	log  *slog.Logger
	now  func() time.Time

	// Set by tests: afterSummary runs between the summary and the archive
	// step; failInTx fails the transaction after its last statement.
	afterSummary func()
	failInTx     func() error
}

var _ agent.Compactor = (*Compactor)(nil)

// NewCompactor returns a Compactor; set it as agent.Options.Compactor.
func NewCompactor(opts CompactorOptions) *Compactor {
	c := &Compactor{opts: opts, log: opts.Log, now: opts.Now}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// Compact implements agent.Compactor.
func (c *Compactor) Compact(ctx context.Context, req agent.CompactionRequest) (agent.CompactionResult, error) {
	start := c.now()
	id := req.Session.ID
	live, err := c.opts.Sessions.Messages(ctx, id, sessions.MessagesOptions{})
	if err != nil {
		return agent.CompactionResult{}, fmt.Errorf("compact session %s: %w", id, err)
	}
	cc := req.Agent.Compaction
	tail, budget := cmp.Or(cc.TailTurns, config.DefaultTailTurns), tailBudget(req)
	p := planCompaction(live, tail, budget)
	if reason := p.skip(); reason != "" {
		return c.skip(ctx, req, reason, nil)
	}
	if p.dropped > 0 || budget > 0 && p.tailTokens > budget {
		c.log.WarnContext(ctx, "compaction keeps fewer turns than tail_turns: the latest turns are over tail_budget_pct of the window",
			"session_id", id, "tail_turns", tail, "kept_turns", p.keptTurns, "tail_tokens", p.tailTokens, "budget_tokens", budget)
	}

	// Step 1: the flush, once per compaction cycle: a flush whose
	// compaction failed still counts, and its messages are archived now.
	memories := 0
	if !p.flushed && c.opts.Memory != nil && req.Side != nil {
		limit := cmp.Or(cc.FlushTimeout, config.DefaultFlushTimeout)
		fctx, cancel := context.WithTimeout(ctx, limit)
		res, saved, err := c.flush(fctx, req)
		timedOut := fctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return agent.CompactionResult{}, fmt.Errorf("compact session %s: %w", id, ctx.Err())
		case err != nil && timedOut:
			c.log.WarnContext(ctx, "memory flush passed its deadline; compacting without it", "session_id", id,
				"flush_timeout", limit, "error", err)
		case err != nil:
			c.log.WarnContext(ctx, "memory flush failed; compacting without it", "session_id", id, "error", err)
		}
		for _, m := range res.Messages {
			p.also = append(p.also, m.ID)
		}
		memories = saved
	}

	// Step 2: the summary, within its deadline (retries included). Past
	// it nothing has been written: the history stays as it was.
	limit := cmp.Or(cc.SummaryTimeout, config.DefaultSummaryTimeout)
	sctx, cancel := context.WithTimeout(ctx, limit)
	text, usage, err := c.summarize(sctx, req, p.summarized)
	timedOut := sctx.Err() != nil
	cancel()
	if err == nil && c.afterSummary != nil {
		c.afterSummary()
	}
	if ctx.Err() != nil {
		return agent.CompactionResult{}, fmt.Errorf("compact session %s: %w", id, ctx.Err())
	}
	if err != nil && timedOut {
		reason := fmt.Sprintf("the summary took longer than %s", limit)
		c.log.WarnContext(ctx, "compaction timed out; nothing was compacted and the history is as it was", "session_id", id,
			"trigger", string(req.When), "summary_timeout", limit, "error", err)
		if req.When == agent.CompactManual {
			return c.skip(ctx, req, reason, fmt.Errorf("%s (compaction.summary_timeout): %w", reason, err))
		}
		return agent.CompactionResult{Skipped: reason}, nil
	}
	if err != nil {
		return c.skip(ctx, req, "the summary failed: "+err.Error(), err)
	}

	// Steps 3 and 4: archive, persist and index, in one transaction.
	content := fmt.Sprintf("Summary of the %d earlier messages of this conversation:\n\n%s", p.covered, text)
	scope := ScopeOf(req.Session.Key)
	stored, err := c.opts.Sessions.Compact(ctx, id, sessions.CompactInput{
		Through: p.through, Expect: p.expect, Also: p.also, Summary: content, Model: req.SummaryModel, Usage: usage,
		Tx: func(ctx context.Context, q dbutil.Querier, m sessions.Message) error {
			if c.opts.Memory != nil {
				// A summary over the item limit is indexed in part rather than not at all.
				indexed := textcut.Runes(m.Content, MaxSummaryRunes, "")
				if _, err := c.opts.Memory.SummaryTx(ctx, q, scope, Summary{SessionID: id, MessageID: m.ID, Content: indexed}); err != nil {
					return err
				}
			}
			if c.failInTx != nil {
				return c.failInTx()
			}
			return nil
		},
	})
	if err != nil {
		if errors.Is(err, sessions.ErrCompactionConflict) {
			return c.skip(ctx, req, err.Error(), err)
		}
		return agent.CompactionResult{}, err
	}
	if c.opts.Memory != nil {
		c.opts.Memory.Wake()
	}

	// Step 5: tell.
	res := agent.CompactionResult{
		Compacted: true, SummaryID: stored.Summary.ID, Summarized: p.covered, Archived: stored.Archived,
		Memories: memories, TokensBefore: stored.TokensBefore, TokensAfter: stored.TokensAfter,
		Duration:        c.now().Sub(start),
		SummarizedTurns: p.summarizedTurns, KeptTurns: p.keptTurns, KeptMessages: len(p.kept),
	}
	if first, last := userMessages(p.summarized); first != nil {
		res.SummarizedFrom, res.SummarizedTo = excerpt(first.Content), excerpt(last.Content)
	}
	if len(p.kept) > 0 {
		res.KeptFrom = excerpt(p.kept[0].Content)
	}
	if req.Agent.Compaction.Notify {
		res.Notice = fmt.Sprintf("Summarized %d earlier messages to free up context.", p.covered)
	}
	c.opts.Bus.Publish(events.Event{Type: EventContextCompacted, SessionID: string(id), At: c.now(), Data: ContextCompacted{
		SessionID: id, SummaryID: res.SummaryID, Trigger: req.When, Summarized: res.Summarized, Archived: res.Archived,
		Memories: memories, TokensBefore: res.TokensBefore, TokensAfter: res.TokensAfter, Duration: res.Duration,
		Model: req.SummaryModel, Usage: usage,
	}})
	return res, nil
}

// skip reports a compaction that did not run. A manual one is told as an
// error; before or after a turn it is logged, and the turn goes on.
func (c *Compactor) skip(ctx context.Context, req agent.CompactionRequest, reason string, cause error) (agent.CompactionResult, error) {
	if req.When == agent.CompactManual {
		if cause == nil {
			cause = errNothingToCompact
		}
		return agent.CompactionResult{Skipped: reason}, fmt.Errorf("compact session %s: %s: %w", req.Session.ID, reason, cause)
	}
	if cause != nil {
		c.log.WarnContext(ctx, "compaction skipped; the turn goes on without it", "session_id", req.Session.ID,
			"trigger", string(req.When), "tokens", req.Used, "threshold", req.Threshold, "error", cause)
	}
	return agent.CompactionResult{Skipped: reason}, nil
}

var errNothingToCompact = errors.New("nothing to compact")

// flush runs the memory flush turn with only memory_write, and counts the
// memories it saved.
func (c *Compactor) flush(ctx context.Context, req agent.CompactionRequest) (agent.Result, int, error) {
	var saved atomic.Int64
	write := WriteTool(c.opts.Memory)
	run := write.Run
	write.Run = func(ctx context.Context, call tools.Call) (string, error) {
		out, err := run(ctx, call)
		if err == nil {
			saved.Add(1)
		}
		return out, err
	}
	temp := flushTemperature
	res, err := req.Side(ctx, agent.SideTurn{Name: FlushTurnName, Prompt: FlushPrompt, Tools: []tools.Tool{write},
		Temperature: &temp, MaxTokens: flushMaxTokens, MaxSteps: flushMaxSteps})
	return res, int(saved.Load()), err
}

// compactionPlan is what one compaction replaces.
type compactionPlan struct {
	// live counts the conversation's live messages (side turns left out).
	live int
	// summarized are the conversation messages the summary replaces, the
	// previous summary first; covered counts those that are not summaries,
	// summarizedTurns the user messages among them.
	summarized      []sessions.Message
	covered         int
	summarizedTurns int
	// kept are the conversation messages kept as they are: keptTurns
	// turns, starting at a user message, of tailTokens tokens.
	kept       []sessions.Message
	keptTurns  int
	tailTokens int64
	// wanted is the turns asked to be kept (tail_turns); dropped counts
	// those left out of the kept part for the budget.
	wanted, dropped int
	// through is the seq of the last one, and expect the visible messages
	// up to it (side turns' included).
	through int64
	expect  int
	// also are side-turn messages after through, archived too.
	also []sessions.MessageID
	// flushed says a flush already ran this cycle.
	flushed bool
}

// planCompaction keeps the last tailTurns turns, each from a user message
// to the next, so the kept part always starts at a user message: its
// question is never left in the summary while its answer stays. Past
// budget tokens (0: no budget), one turn fewer is kept, down to one.
func planCompaction(live []sessions.Message, tailTurns int, budget int64) compactionPlan {
	var p compactionPlan
	conv := make([]sessions.Message, 0, len(live))
	for _, m := range live {
		switch side, name := sideTurn(m); {
		case !side:
			conv = append(conv, m)
		case name == FlushTurnName:
			p.flushed = true
		}
	}
	p.live, p.wanted = len(conv), max(tailTurns, 1)
	var starts []int
	for i, m := range conv {
		if m.Role == sessions.RoleUser {
			starts = append(starts, i)
		}
	}
	p.keptTurns = min(p.wanted, len(starts))
	keep := 0 // where the kept part starts; with no user message, nothing is summarized
	if p.keptTurns > 0 {
		keep = starts[len(starts)-p.keptTurns]
		p.tailTokens = tokensOf(conv[keep:])
		for p.keptTurns > 1 && budget > 0 && p.tailTokens > budget {
			p.keptTurns--
			p.dropped++
			keep = starts[len(starts)-p.keptTurns]
			p.tailTokens = tokensOf(conv[keep:])
		}
	}
	p.summarized, p.kept = conv[:keep], conv[keep:]
	for _, m := range p.summarized {
		if !m.Summary {
			p.covered++
		}
		if m.Role == sessions.RoleUser {
			p.summarizedTurns++
		}
	}
	if keep == 0 {
		return p
	}
	p.through = conv[keep-1].Seq
	for _, m := range live {
		if m.Seq <= p.through {
			p.expect++
		} else if side, _ := sideTurn(m); side {
			p.also = append(p.also, m.ID)
		}
	}
	return p
}

func (p compactionPlan) skip() string {
	switch {
	case p.live < MinLiveMessages:
		return fmt.Sprintf("only %d live messages; compaction needs at least %d", p.live, MinLiveMessages)
	case p.covered == 0:
		if n := p.wanted - p.dropped; n != 1 {
			return fmt.Sprintf("nothing older than the %d latest turns, which are kept as they are", n)
		}
		return "nothing older than the latest turn, which is kept as it is"

	}
	return ""
}

// tailBudget is the most tokens the kept turns may take: the agent's
// tail_budget_pct of the usable window (the turn's window less the room
// kept for the reply); 0 when the window is unknown.
func tailBudget(req agent.CompactionRequest) int64 {
	usable := req.Window - agent.Reserve(req.Agent)
	if req.Window <= 0 || usable <= 0 {
		return 0
	}
	pct := cmp.Or(req.Agent.Compaction.TailBudgetPct, config.DefaultTailBudgetPct)
	return int64(usable) * int64(pct) / 100
}

func tokensOf(msgs []sessions.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += m.TokenEstimate
	}
	return n
}

// userMessages are the first and the last user message of msgs, or nils.
func userMessages(msgs []sessions.Message) (first, last *sessions.Message) {
	for i := range msgs {
		if msgs[i].Role == sessions.RoleUser {
			if first == nil {
				first = &msgs[i]
			}
			last = &msgs[i]
		}
	}
	return first, last
}

// excerpt is the start of a message's text, on one line, for /compact.
func excerpt(s string) string {
	return textcut.Runes(strings.Join(strings.Fields(s), " "), excerptRunes, "…")
}

// sideTurn reports whether m was written by a side turn, and which.
func sideTurn(m sessions.Message) (bool, string) {
	for _, part := range m.Parts {
		if part.Type == agent.PartSideTurn {
			return true, part.Name
		}
	}
	return false, ""
}
