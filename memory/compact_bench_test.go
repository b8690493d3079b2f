package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// seedLiveQuery stores n live messages of a session in one statement.
const seedLiveQuery = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2)
INSERT INTO messages (id, session_id, seq, role, content, token_estimate, created_at)
SELECT CAST($1 AS TEXT) || '-' || i, $1, i, CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
	'message ' || i || ': ' || CAST($3 AS TEXT), $4, $5 FROM n`

const seedLiveSessionQuery = `UPDATE sessions SET last_seq = $2, message_count = $2, token_count = $3 WHERE id = $1`

// BenchmarkCompaction measures one whole compaction (flush turn with one
// memory_write, summary, archive and index in one transaction) of a session
// with 50, 500 and 5,000 live messages of about 50 tokens, with a model
// that answers at once: what compaction itself costs. Past its 128k-token
// window the summarizer works in chunks. Run it with
//
//	go test -run '^$' -bench BenchmarkCompaction ./memory/
//
// (set PARLEY_TEST_POSTGRES_URL to include PostgreSQL).
func BenchmarkCompaction(b *testing.B) {
	for _, e := range dbtest.Engines() {
		b.Run(e.Name, func(b *testing.B) {
			for _, n := range []int{50, 500, 5_000} {
				b.Run(fmt.Sprintf("live=%d", n), func(b *testing.B) { benchCompaction(b, e.Open(b), n) })
			}
		})
	}
}

func benchCompaction(b *testing.B, db *dbutil.DB, n int) {
	ctx := context.Background()
	c := newClock()
	store := sessions.NewStore(db, sessions.WithClock(c.Now))
	mem := builtinStore(b, db, c)
	write, _ := json.Marshal(map[string]string{"content": flushFact})
	model := echo.New(echo.WithScript(func(req llm.Request) (llm.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case req.System == summarizeSystem:
			return llm.Response{Text: testSummary}, nil
		case last.Content == FlushPrompt:
			return llm.Response{ToolCalls: []llm.ToolCall{{ID: "w", Name: WriteToolName, Arguments: write}}}, nil
		}
		return llm.Response{Text: "done"}, nil
	}))
	models := func(string) (llm.Model, error) { return model, nil }
	r := agent.New(agent.Options{Store: store, Models: models, DefaultModel: "echo", Tools: tools.NewRegistry(), Now: c.Now,
		Compactor: NewCompactor(CompactorOptions{Sessions: store, Memory: mem, Models: models, Now: c.Now})})
	cfg := agent.AgentConfig{ID: "bench", Prompt: "You are a benchmark.", Model: "echo", MaxContextTokens: 128_000, MaxOutputTokens: 4096}
	text := strings.Repeat("what the user and the agent talk about ", 5)
	est := sessions.EstimateTokens("message 1000: " + text)
	seed := func(i int) sessions.Session {
		sess, _, err := store.Resolve(ctx, sessions.ChatKey("telegram", fmt.Sprint(i), fmt.Sprint(i), "bench"), sessions.Policy{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.Writer().ExecContext(ctx, seedLiveQuery, sess.ID, n, text, est, dbutil.Millis(c.Now())); err != nil {
			b.Fatalf("seed %d messages: %v", n, err)
		}
		if _, err := db.Writer().ExecContext(ctx, seedLiveSessionQuery, sess.ID, n, est*int64(n)); err != nil {
			b.Fatal(err)
		}
		return sess
	}
	var archived int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sess := seed(i)
		b.StartTimer()
		res, err := r.Compact(ctx, sess, cfg)
		if err != nil || !res.Compacted || res.Summarized != n-2*config.DefaultTailTurns { // alternating user and assistant: two messages a turn
			b.Fatalf("Compact = %+v, %v", res, err)
		}
		archived += res.Archived
	}
	b.ReportMetric(float64(archived)/float64(b.N), "archived/op")
}
