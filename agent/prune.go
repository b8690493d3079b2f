package agent

import (
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/skills"
)

// Tool-output pruning changes only the prompt a model call sees; the stored
// results stay as they were (the log is append-only).

// PruneLimits says which tool results pruning may shorten, and when.
type PruneLimits struct {
	// MinChars: only tool results at least this many characters long are
	// eligible.
	MinChars int
	// SoftRatio: once the prompt reaches this fraction of the context
	// window, eligible results keep only their first and last HeadTail
	// characters, with a notice between.
	SoftRatio float64
	// HardRatio: while the prompt is still at or above this fraction after
	// trimming, eligible results are replaced by a notice, oldest first.
	HardRatio float64
	HeadTail  int
	// KeepAssistants: the last this-many assistant messages, and everything
	// after the first of them, are never pruned.
	KeepAssistants int
	// KeepTools names the tools whose results are never pruned: the skill
	// tool's are instructions the model goes on following.
	KeepTools []string
}

var (
	// DefaultPruneLimits apply to every model call.
	DefaultPruneLimits = PruneLimits{MinChars: 50_000, SoftRatio: 0.30, HardRatio: 0.50, HeadTail: 1_500, KeepAssistants: 3,
		KeepTools: []string{skills.ToolName}}
	// AggressivePruneLimits apply to the one retry after the provider said
	// the prompt does not fit its context window.
	AggressivePruneLimits = PruneLimits{MinChars: 10_000, SoftRatio: 0, HardRatio: 0.25, HeadTail: 1_500, KeepAssistants: 3,
		KeepTools: []string{skills.ToolName}}
)

// PruneStats says what pruning did.
type PruneStats struct {
	Trimmed, Cleared int
	// Before and After are the prompt's estimated tokens, counted only
	// when the prompt has a tool result long enough to prune (else 0).
	Before, After int64
}

// PruneToolOutputs returns req's messages with long tool results trimmed or
// cleared as lim says, for a model whose context window is window tokens
// (0 or less: unknown, nothing is pruned). The messages of req are not
// modified; a changed message is a copy.
func PruneToolOutputs(req llm.Request, window int, lim PruneLimits) ([]llm.Message, PruneStats) {
	msgs := req.Messages
	if window <= 0 {
		return msgs, PruneStats{}
	}
	// Only long tool results can be pruned: most prompts have none, and
	// then the prompt's size doesn't matter (nor is it counted).
	protectFrom := protectedFrom(msgs, lim.KeepAssistants)
	var eligible []int
	for i, m := range msgs[:protectFrom] {
		// A string has at least as many bytes as runes: count runes only
		// when the bytes reach the bar.
		if m.Role == llm.RoleTool && len(m.Content) >= lim.MinChars && utf8.RuneCountInString(m.Content) >= lim.MinChars {
			eligible = append(eligible, i)
		}
	}
	eligible = withoutKept(msgs, eligible, lim.KeepTools)
	if len(eligible) == 0 {
		return msgs, PruneStats{}
	}
	total := requestOverhead(req)
	sizes := make([]int64, len(msgs))
	for i, m := range msgs {
		sizes[i] = messageTokens(m)
		total += sizes[i]
	}
	stats := PruneStats{Before: total, After: total}
	if !atLeast(total, window, lim.SoftRatio) {
		return msgs, stats
	}
	out := append([]llm.Message(nil), msgs...)
	replace := func(i int, content string) {
		out[i].Content = content
		n := messageTokens(out[i])
		total += n - sizes[i]
		sizes[i] = n
	}
	trimmed := 0
	for _, i := range eligible {
		if s, ok := trimMiddle(msgs[i].Content, lim.HeadTail); ok {
			replace(i, s)
			trimmed++
		}
	}
	stats.Trimmed = trimmed
	for _, i := range eligible {
		if !atLeast(total, window, lim.HardRatio) {
			break
		}
		if out[i].Content != msgs[i].Content {
			stats.Trimmed--
		}
		replace(i, fmt.Sprintf("[This tool output (%d characters) was cleared to save context space. Run the tool again if you need it.]",
			utf8.RuneCountInString(msgs[i].Content)))
		stats.Cleared++
	}
	stats.After = total
	return out, stats
}

// atLeast reports whether tokens ≥ ratio × window, in integer arithmetic so
// a prompt exactly at a threshold counts as reaching it.
func atLeast(tokens int64, window int, ratio float64) bool {
	return tokens*10_000 >= int64(math.Round(ratio*10_000))*int64(window)
}

// protectedFrom is the index of the keep-th assistant message from the end:
// it and everything after it are never pruned. With fewer assistant
// messages than keep, everything is protected.
func protectedFrom(msgs []llm.Message, keep int) int {
	if keep <= 0 {
		return len(msgs)
	}
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleAssistant {
			seen++
			if seen == keep {
				return i
			}
		}
	}
	return 0
}

// trimMiddle keeps the first and last n characters of s with a notice
// between; ok is false when that would not make s shorter.
func trimMiddle(s string, n int) (string, bool) {
	r := []rune(s)
	if len(r) <= 2*n {
		return s, false
	}
	return string(r[:n]) + fmt.Sprintf("\n\n[… %d characters of this tool output were trimmed to save context space …]\n\n", len(r)-2*n) +
		string(r[len(r)-n:]), true
}

// EstimateRequestTokens estimates the tokens of a whole prompt: the system
// prompt, the tool definitions and the messages, with the same deliberately
// generous heuristic as stored messages (sessions.EstimateTokens).
func EstimateRequestTokens(req llm.Request) int64 {
	n := requestOverhead(req)
	for _, m := range req.Messages {
		n += messageTokens(m)
	}
	return n
}

func requestOverhead(req llm.Request) int64 {
	n := sessions.EstimateTokens(req.System)
	for _, t := range req.Tools {
		n += sessions.EstimateTokens(t.Name) + sessions.EstimateTokens(t.Description) + (int64(len(t.Schema))+2)/3
	}
	return n
}

func messageTokens(m llm.Message) int64 {
	n := sessions.EstimateTokens(m.Content)
	for _, c := range m.ToolCalls {
		n += sessions.EstimateTokens(c.Name) + (int64(len(c.Arguments))+2)/3
	}
	return n
}

// withoutKept drops from eligible the results of calls to the keep tools,
// found by the call ids of the assistant messages before them.
func withoutKept(msgs []llm.Message, eligible []int, keep []string) []int {
	if len(eligible) == 0 || len(keep) == 0 {
		return eligible
	}
	kept := map[string]bool{}
	for _, m := range msgs[:eligible[len(eligible)-1]] {
		for _, c := range m.ToolCalls {
			if slices.Contains(keep, c.Name) {
				kept[c.ID] = true
			}
		}
	}
	if len(kept) == 0 {
		return eligible
	}
	out := eligible[:0:0]
	for _, i := range eligible {
		if !kept[msgs[i].ToolCallID] {
			out = append(out, i)
		}
	}
	return out
}
