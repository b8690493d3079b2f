package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
)

const (
	summaryTemperature = 0.3
	// summaryHeadTail is how much of a long tool result the summarizer sees
	// once the transcript is over its budget.
	summaryHeadTail = 1500
	// maxArgRunes caps the tool-call arguments shown in a transcript.
	maxArgRunes = 1000
	// maxShrinks is how often the budget is halved after the provider said
	// the summarizer's prompt does not fit.
	maxShrinks = 2
)

const summarizeSystem = `You write the running summary of a conversation between a user and an AI assistant. ` +
	`The summary replaces the older messages in the assistant's context, so keep everything the assistant needs to ` +
	`carry on: the user's goal, what was done, what was decided and why, names, numbers, dates, file paths, ids, ` +
	`commitments and open questions.

Write about 500 words of Markdown with exactly these four sections, in this order:

## Goal
## Progress
## Decisions
## Next steps

Use only what the transcript says. If it starts with an earlier summary, fold that summary in.`

const mergeInstruction = "These are summaries of consecutive parts of one conversation, oldest first. " +
	"Combine them into one summary with the same four sections."

var errEmptySummary = errors.New("the summarizer returned no text")

// entry is one message of a transcript, with its estimated tokens.
type entry struct {
	text   string
	tokens int64
}

func newEntry(text string) entry { return entry{text: text, tokens: sessions.EstimateTokens(text) + 2} }

func totalTokens(es []entry) int64 {
	var n int64
	for _, e := range es {
		n += e.tokens
	}
	return n
}

// transcript renders messages as the summarizer reads them.
func transcript(msgs []sessions.Message) []entry {
	tools := map[string]string{}
	out := make([]entry, 0, len(msgs))
	for _, m := range msgs {
		var b strings.Builder
		switch {
		case m.Summary:
			b.WriteString("Earlier summary:\n" + m.Content)
		case m.Role == sessions.RoleUser:
			b.WriteString("User: " + m.Content)
			for _, p := range m.Parts {
				if _, ok := p.File(); ok {
					fmt.Fprintf(&b, "\n[sent the file %s, %s]", p.Name, p.MediaType)
				}
			}
		case m.Role == sessions.RoleAssistant:
			b.WriteString("Assistant: " + m.Content)
			for _, c := range m.ToolCalls {
				tools[c.ID] = c.Name
				args, _ := cut(string(c.Arguments), maxArgRunes)
				fmt.Fprintf(&b, "\n[called %s %s]", c.Name, args)
			}
		case m.Role == sessions.RoleTool:
			fmt.Fprintf(&b, "Result of %s: %s", cmpOr(tools[m.ToolCallID], "a tool"), m.Content)
		default:
			b.WriteString("Note: " + m.Content)
		}
		out = append(out, newEntry(b.String()))
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// summarize writes the summary of msgs with the request's summary model,
// keeping each call within the model's context window.
func (c *Compactor) summarize(ctx context.Context, req agent.CompactionRequest, msgs []sessions.Message) (string, *sessions.Usage, error) {
	if c.opts.Models == nil {
		return "", nil, fmt.Errorf("open model %s: no model factory", req.SummaryModel)
	}
	_, name, err := llm.ParseModel(req.SummaryModel)
	if err != nil {
		return "", nil, err
	}
	raw, err := c.opts.Models(req.SummaryModel)
	if err != nil {
		return "", nil, fmt.Errorf("open model %s: %w", req.SummaryModel, err)
	}
	chain := fallbackChain{log: c.log, session: req.Session.ID}
	policy := c.opts.Retry
	next := policy.OnRetry
	policy.OnRetry = func(ctx context.Context, attempt int, err error, wait time.Duration) {
		c.log.WarnContext(ctx, "summarizer retrying", "session_id", req.Session.ID, "model", req.SummaryModel,
			"attempt", attempt, "wait", wait, "error", err)
		if next != nil {
			next(ctx, attempt, err, wait)
		}
	}
	if r := req.Agent.Compaction.Retries; r != nil {
		policy.MaxAttempts = max(*r, 0) + 1
	}
	chain.links = append(chain.links, link{spec: req.SummaryModel, name: name, m: llm.WithRetry(raw, policy)})
	// The agent's fallbacks write the summary when its model fails past its
	// retries in a way another may not (down, overloaded, stalled).
	for _, spec := range req.Agent.FallbackModels {
		_, fname, perr := llm.ParseModel(spec)
		m, merr := c.opts.Models(spec)
		if perr != nil || merr != nil {
			c.log.WarnContext(ctx, "fallback model can't be opened for the summary", "session_id", req.Session.ID, "model", spec,
				"error", errors.Join(perr, merr))
			continue
		}
		chain.links = append(chain.links, link{spec: spec, name: fname, m: llm.WithRetry(m, policy)})
	}
	var model llm.Model = &chain
	ctx = llm.WithCallTimeouts(ctx, req.Agent.Timeouts)

	entries := transcript(msgs)
	maxTokens := cmp.Or(req.Agent.Compaction.SummaryMaxTokens, config.DefaultSummaryMaxTokens)
	budget := inputBudgetFor(req.SummaryWindow, maxTokens)
	var usage llm.Usage
	for shrink := 0; ; shrink++ {
		text, u, err := c.summarizeWithin(ctx, model, name, maxTokens, entries, budget)
		usage = usage.Add(u)
		if err != nil && errors.Is(err, llm.ErrContextLength) && shrink < maxShrinks && ctx.Err() == nil {
			budget = min(budget, totalTokens(entries)) / 2
			continue
		}
		su := &sessions.Usage{Input: usage.Input, Output: usage.Output, Reasoning: usage.Reasoning,
			CacheRead: usage.CacheRead, CacheWrite: usage.CacheWrite}
		return text, su, err
	}
}

// fallbackChain is the summarizer's model and the agent's fallbacks, in
// order: each call goes to the first that answers.
type fallbackChain struct {
	links   []link
	log     *slog.Logger
	session sessions.ID
}

type link struct {
	spec, name string
	m          llm.Model
}

func (f *fallbackChain) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	var (
		resp llm.Response
		err  error
	)
	for i, l := range f.links {
		req.Model = l.name
		resp, err = l.m.Stream(ctx, req, onDelta)
		worthy := llm.Retryable(err) || errors.Is(err, context.DeadlineExceeded)
		if err == nil || ctx.Err() != nil || !worthy || resp.Text != "" || i == len(f.links)-1 {
			return resp, err
		}
		f.log.WarnContext(ctx, "summarizer failed; its fallback writes the summary", "session_id", f.session, "model", l.spec,
			"fallback", f.links[i+1].spec, "error", err)
	}
	return resp, err
}

// inputBudget is how many transcript tokens one summarizer call may take,
// with the default summary length.
func inputBudget(window int) int64 { return inputBudgetFor(window, config.DefaultSummaryMaxTokens) }

// inputBudgetFor is inputBudget for a summary of up to maxTokens.
func inputBudgetFor(window, maxTokens int) int64 {
	if window <= 0 {
		return math.MaxInt64 / 4
	}
	b := int64(window)*9/10 - int64(maxTokens) - sessions.EstimateTokens(summarizeSystem) - 64
	return max(b, 256)
}

// summarizeWithin summarizes entries in calls of at most budget tokens. When
// the whole transcript is over, it runs these in order until it fits: prune
// tool outputs, summarize in chunks, then drop the middle (keep the head and
// the tail) of what is left to merge.
func (c *Compactor) summarizeWithin(ctx context.Context, m llm.Model, name string, maxTokens int, entries []entry, budget int64) (string, llm.Usage, error) {
	var usage llm.Usage
	call := func(instruction string, es []entry) (string, error) {
		text, u, err := summaryCall(ctx, m, name, maxTokens, instruction, es)
		usage = usage.Add(u)
		return text, err
	}
	if totalTokens(entries) <= budget {
		text, err := call("Summarize this conversation.", entries)
		return text, usage, err
	}
	entries = pruneEntries(entries)
	if totalTokens(entries) <= budget {
		text, err := call("Summarize this conversation. Long tool outputs are shortened.", entries)
		return text, usage, err
	}
	chunks := chunkEntries(entries, budget)
	partials := make([]entry, 0, len(chunks))
	for i, ch := range chunks {
		text, err := call(fmt.Sprintf("Summarize part %d of %d of this conversation.", i+1, len(chunks)), ch)
		if err != nil {
			return "", usage, err
		}
		partials = append(partials, newEntry(fmt.Sprintf("Part %d of %d:\n%s", i+1, len(chunks), text)))
	}
	if len(partials) == 1 {
		text := strings.TrimPrefix(partials[0].text, "Part 1 of 1:\n")
		return text, usage, nil
	}
	text, err := call(mergeInstruction, dropMiddle(partials, budget))
	return text, usage, err
}

func summaryCall(ctx context.Context, m llm.Model, name string, maxTokens int, instruction string, es []entry) (string, llm.Usage, error) {
	var b strings.Builder
	b.WriteString(instruction)
	for _, e := range es {
		b.WriteString("\n\n")
		b.WriteString(e.text)
	}
	temp := summaryTemperature
	resp, err := m.Stream(ctx, llm.Request{Model: name, System: summarizeSystem, Temperature: &temp, MaxTokens: maxTokens,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: b.String()}}}, nil)
	if err != nil {
		return "", resp.Usage, err
	}
	text := strings.TrimSpace(resp.Text)
	if text == "" {
		return "", resp.Usage, errEmptySummary
	}
	return text, resp.Usage, nil
}

// pruneEntries shortens long tool results to their head and tail.
func pruneEntries(es []entry) []entry {
	out := make([]entry, len(es))
	for i, e := range es {
		out[i] = e
		if strings.HasPrefix(e.text, "Result of ") {
			if s, ok := cut(e.text, 2*summaryHeadTail); ok {
				out[i] = newEntry(s)
			}
		}
	}
	return out
}

// chunkEntries splits es into runs of at most budget tokens; an entry over
// the budget on its own loses its middle.
func chunkEntries(es []entry, budget int64) [][]entry {
	var chunks [][]entry
	var cur []entry
	var n int64
	for _, e := range es {
		if e.tokens > budget {
			// At worst 3 characters a token (JSON), less room for the notice.
			s, _ := cut(e.text, int(max(budget*3-100, 200)))
			e = newEntry(s)
		}
		if n+e.tokens > budget && len(cur) > 0 {
			chunks = append(chunks, cur)
			cur, n = nil, 0
		}
		cur = append(cur, e)
		n += e.tokens
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// dropMiddle keeps the first and last entries that fit in budget together,
// with a notice where the middle was.
func dropMiddle(es []entry, budget int64) []entry {
	if totalTokens(es) <= budget {
		return es
	}
	notice := func(n int) entry {
		return newEntry(fmt.Sprintf("[… %d middle parts left out: the conversation was too long to summarize whole …]", n))
	}
	budget -= notice(len(es)).tokens
	head, tail := 0, len(es)
	var n int64
	for head < tail {
		next, fromHead := es[tail-1], false
		if len(es)-tail >= head {
			next, fromHead = es[head], true
		}
		if n+next.tokens > budget {
			break
		}
		n += next.tokens
		if fromHead {
			head++
		} else {
			tail--
		}
	}
	out := append(append([]entry(nil), es[:head]...), notice(tail-head))
	return append(out, es[tail:]...)
}

// cut keeps the first and last n/2 characters of s, with a notice between;
// ok is false when s is no longer than n.
func cut(s string, n int) (string, bool) {
	r := []rune(s)
	if len(r) <= n {
		return s, false
	}
	h := n / 2
	return string(r[:h]) + fmt.Sprintf(" […%d characters left out…] ", len(r)-2*h) + string(r[len(r)-h:]), true
}
