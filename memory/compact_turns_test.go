package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// appendTurns stores n turns of a user message, a tool call, its result
// and the reply: four messages a turn, so a cut by message count lands
// mid-turn.
func (e *compactEnv) appendTurns(n int, pad string) {
	e.t.Helper()
	ctx := context.Background()
	for i := 1; i <= n; i++ {
		call := fmt.Sprintf("c%d", i)
		for _, m := range []sessions.Message{
			{Role: sessions.RoleUser, Content: fmt.Sprintf("question %d: what about the garden party?", i) + pad},
			{Role: sessions.RoleAssistant, ToolCalls: []sessions.ToolCall{{ID: call, Name: "lookup", Arguments: json.RawMessage(`{}`)}}},
			{Role: sessions.RoleTool, ToolCallID: call, Content: fmt.Sprintf("result %d", i)},
			{Role: sessions.RoleAssistant, Content: fmt.Sprintf("answer %d: Saturday.", i)},
		} {
			if _, err := e.store.Append(ctx, e.sess.ID, m); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// Compaction keeps whole turns: with tail_turns 1, 2 and 4 the kept part
// is that many turns and starts at a user message, however many messages
// each turn has; /compact's result says what was kept and summarized.
func TestCompactionKeepsWholeTurns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		for _, tail := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("tail_turns=%d", tail), func(t *testing.T) {
				e := newCompactEnv(t, open)
				e.cfg.MaxContextTokens = 100_000
				e.cfg.Compaction = agent.CompactionConfig{TailTurns: tail}
				e.appendTurns(7, "")
				res, err := e.runner.Compact(context.Background(), e.sess, e.cfg)
				if err != nil || !res.Compacted {
					t.Fatalf("Compact = %+v, %v", res, err)
				}
				live := conversation(e.live())
				if !live[0].Summary || len(live) != 1+4*tail {
					t.Fatalf("live after compaction: %d messages (%v), want the summary and %d turns", len(live), roles(live), tail)
				}
				first := live[1]
				if want := fmt.Sprintf("question %d:", 8-tail); first.Role != sessions.RoleUser || !strings.HasPrefix(first.Content, want) {
					t.Fatalf("the kept part starts with %s %q, want the user's %q", first.Role, first.Content, want)
				}
				if res.KeptTurns != tail || res.KeptMessages != 4*tail || res.Summarized != 4*(7-tail) || res.SummarizedTurns != 7-tail ||
					!strings.HasPrefix(res.KeptFrom, fmt.Sprintf("question %d:", 8-tail)) || !strings.HasPrefix(res.SummarizedFrom, "question 1:") ||
					!strings.HasPrefix(res.SummarizedTo, fmt.Sprintf("question %d:", 7-tail)) {
					t.Fatalf("result %+v", res)
				}
			})
		}
	})
}

// Kept turns past tail_budget_pct of the usable window: one turn fewer
// each time, down to what fits, with a warning.
func TestCompactionTailBudgetKeepsFewerTurns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newCompactEnv(t, open)
		// Usable window 4000-256; 5% of it is 187 tokens, about two of
		// these turns of some 75 tokens.
		e.cfg.Compaction = agent.CompactionConfig{TailTurns: 4, TailBudgetPct: 5}
		e.appendTurns(7, strings.Repeat(" plans for the garden party", 10))
		res, err := e.runner.Compact(context.Background(), e.sess, e.cfg)
		if err != nil || !res.Compacted || res.KeptTurns >= 4 || res.KeptTurns < 1 {
			t.Fatalf("Compact = %+v, %v; want fewer than 4 turns kept", res, err)
		}
		var kept int64
		for _, m := range conversation(e.live())[1:] {
			kept += m.TokenEstimate
		}
		if budget := int64((4000 - 256) * 5 / 100); res.KeptTurns > 1 && kept > budget {
			t.Fatalf("kept %d tokens in %d turns, over the budget of %d", kept, res.KeptTurns, budget)
		}
		if logs := e.logs.String(); !strings.Contains(logs, "compaction keeps fewer turns than tail_turns") ||
			!strings.Contains(logs, "kept_turns="+fmt.Sprint(res.KeptTurns)) {
			t.Fatalf("no warning:\n%s", logs)
		}
	})
}

func roles(msgs []sessions.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role)
	}
	return out
}
