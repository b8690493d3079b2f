package agent

import (
	"strings"
	"testing"

	"github.com/parleyd/parley/llm"
)

// pruneRequest is a conversation with one tool result of n characters,
// followed by three more assistant messages (so the result is prunable).
func pruneRequest(n int, protected bool) llm.Request {
	result := llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: strings.Repeat("a", n)}
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "fetch the page"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "fetch", Arguments: []byte(`{}`)}}},
	}
	if !protected {
		msgs = append(msgs, result)
	}
	msgs = append(msgs,
		llm.Message{Role: llm.RoleAssistant, Content: "a2"},
		llm.Message{Role: llm.RoleUser, Content: "and?"},
		llm.Message{Role: llm.RoleAssistant, Content: "a3"},
		llm.Message{Role: llm.RoleUser, Content: "more"},
		llm.Message{Role: llm.RoleAssistant, Content: "a4"},
	)
	if protected {
		// After the third-last assistant message: never pruned.
		msgs = append(msgs[:3], append([]llm.Message{result}, msgs[3:]...)...)
		msgs[2].ToolCalls = []llm.ToolCall{{ID: "c1", Name: "fetch", Arguments: []byte(`{}`)}}
	}
	return llm.Request{System: "system prompt", Messages: msgs}
}

func toolContent(msgs []llm.Message) string {
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			return m.Content
		}
	}
	return ""
}

// windowAt is the largest window in which tokens reach ratio of it.
func windowAt(tokens int64, ratio float64) int {
	w := int(float64(tokens) / ratio)
	for atLeast(tokens, w+1, ratio) {
		w++
	}
	for !atLeast(tokens, w, ratio) {
		w--
	}
	return w
}

func TestPruneThresholdEdges(t *testing.T) {
	eligible := pruneRequest(50_000, false)
	before := EstimateRequestTokens(eligible)
	soft := windowAt(before, 0.30)
	// The trimmed size, from a window where only the soft trim applies.
	_, trimmedStats := PruneToolOutputs(eligible, soft, DefaultPruneLimits)
	afterTrim := trimmedStats.After
	hard := windowAt(afterTrim, 0.50)

	cases := []struct {
		name    string
		req     llm.Request
		window  int
		trimmed int
		cleared int
	}{
		{"49,999 characters are never eligible", pruneRequest(49_999, false), 1000, 0, 0},
		{"just under 30% keeps the result", eligible, soft + 1, 0, 0},
		{"at 30% trims it", eligible, soft, 1, 0},
		{"trimmed to just under 50% stays trimmed", eligible, hard + 1, 1, 0},
		{"still at 50% after trimming clears it", eligible, hard, 0, 1},
		{"the last 3 assistant messages are never pruned", pruneRequest(60_000, true), 1000, 0, 0},
		{"an unknown window prunes nothing", eligible, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := toolContent(tc.req.Messages)
			msgs, stats := PruneToolOutputs(tc.req, tc.window, DefaultPruneLimits)
			if stats.Trimmed != tc.trimmed || stats.Cleared != tc.cleared {
				t.Fatalf("window %d: %+v, want %d trimmed and %d cleared", tc.window, stats, tc.trimmed, tc.cleared)
			}
			got := toolContent(msgs)
			switch {
			case tc.cleared > 0:
				if !strings.Contains(got, "was cleared to save context space") || strings.Contains(got, "aaaa") {
					t.Fatalf("cleared result %q", got)
				}
			case tc.trimmed > 0:
				if !strings.HasPrefix(got, orig[:1500]+"\n\n[… 47000 characters") || !strings.HasSuffix(got, "…]\n\n"+orig[:1500]) {
					t.Fatalf("trimmed result %q…", got[:1600])
				}
				if stats.After >= stats.Before {
					t.Fatalf("stats %+v", stats)
				}
			default:
				if got != orig {
					t.Fatal("result changed")
				}
			}
			// Storage is never touched: the request keeps its content.
			if toolContent(tc.req.Messages) != orig {
				t.Fatal("the request's own message was modified")
			}
		})
	}
}

// Hard clearing goes oldest first and stops once under 50%.
func TestPruneClearsOldestFirst(t *testing.T) {
	req := pruneRequest(50_000, false)
	second := llm.Message{Role: llm.RoleTool, ToolCallID: "c2", Content: strings.Repeat("b", 50_000)}
	req.Messages = append(req.Messages[:3:3], append([]llm.Message{
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c2", Name: "fetch", Arguments: []byte(`{}`)}}}, second,
	}, req.Messages[3:]...)...)
	_, trim := PruneToolOutputs(req, windowAt(EstimateRequestTokens(req), 0.30), DefaultPruneLimits)
	if trim.Trimmed != 2 {
		t.Fatalf("%+v", trim)
	}
	// One cleared result is enough to get under 50% of this window.
	window := windowAt(trim.After, 0.50)
	msgs, stats := PruneToolOutputs(req, window, DefaultPruneLimits)
	if stats.Cleared != 1 || stats.Trimmed != 1 {
		t.Fatalf("%+v", stats)
	}
	if !strings.Contains(msgs[2].Content, "cleared") || !strings.HasPrefix(msgs[4].Content, "bbbb") {
		t.Fatalf("cleared the wrong one: %q / %q", msgs[2].Content[:40], msgs[4].Content[:40])
	}
}

func TestAggressivePruneLimitsAreLower(t *testing.T) {
	req := pruneRequest(20_000, false)
	window := int(EstimateRequestTokens(req)) * 100 // 1%: far below every default threshold
	if _, stats := PruneToolOutputs(req, window, DefaultPruneLimits); stats.Trimmed+stats.Cleared != 0 {
		t.Fatalf("default limits pruned %+v", stats)
	}
	if _, stats := PruneToolOutputs(req, window, AggressivePruneLimits); stats.Trimmed != 1 {
		t.Fatalf("aggressive limits: %+v", stats)
	}
}
