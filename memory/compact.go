package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/textcut"
	"github.com/parleyd/parley/tools"
)

// EventContextCompacted is published after a compaction commits.
const EventContextCompacted events.Type = "context.compacted" // Data: ContextCompacted

// Compaction limits.
const (
	// MinLiveMessages is the fewest live messages a session needs before it
	// is compacted.
	MinLiveMessages = 6
	// KeepRecent is how many of the most recent messages stay verbatim.
	KeepRecent = 10
)

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
	p := planCompaction(live)
	if reason := p.skip(); reason != "" {
		return c.skip(ctx, req, reason, nil)
	}

	// Step 1: the flush, once per compaction cycle: a flush whose
	// compaction failed still counts, and its messages are archived now.
	memories := 0
	if !p.flushed && c.opts.Memory != nil && req.Side != nil {
		res, saved, err := c.flush(ctx, req)
		if ctx.Err() != nil {
			return agent.CompactionResult{}, fmt.Errorf("compact session %s: %w", id, ctx.Err())
		}
		if err != nil {
			c.log.WarnContext(ctx, "memory flush failed; compacting without it", "session_id", id, "error", err)
		}
		for _, m := range res.Messages {
			p.also = append(p.also, m.ID)
		}
		memories = saved
	}

	// Step 2: the summary.
	text, usage, err := c.summarize(ctx, req, p.summarized)
	if err == nil && c.afterSummary != nil {
		c.afterSummary()
	}
	if ctx.Err() != nil {
		return agent.CompactionResult{}, fmt.Errorf("compact session %s: %w", id, ctx.Err())
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
		Duration: c.now().Sub(start),
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
	// previous summary first; covered counts those that are not summaries.
	summarized []sessions.Message
	covered    int
	// through is the seq of the last one, and expect the visible messages
	// up to it (side turns' included).
	through int64
	expect  int
	// also are side-turn messages after through, archived too.
	also []sessions.MessageID
	// flushed says a flush already ran this cycle.
	flushed bool
}

// planCompaction keeps the KeepRecent most recent conversation messages, or
// a few more so that no tool result is kept without its call.
func planCompaction(live []sessions.Message) compactionPlan {
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
	p.live = len(conv)
	keep := max(0, len(conv)-KeepRecent)
	for keep > 0 && conv[keep].Role == sessions.RoleTool {
		keep--
	}
	p.summarized = conv[:keep]
	for _, m := range p.summarized {
		if !m.Summary {
			p.covered++
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
		return fmt.Sprintf("nothing older than the %d most recent messages, which are kept as they are", KeepRecent)
	}
	return ""
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
