package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// seedArchiveQuery archives n messages of a session in one statement.
const seedArchiveQuery = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2)
INSERT INTO message_archive (id, session_id, seq, role, content, token_estimate, created_at, archived_at, compaction_id)
SELECT CAST($1 AS TEXT) || '-' || i, $1, i, CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
	CAST($3 AS TEXT) || i, 60, $4, $4, 'bench-compaction' FROM n`

const seedSummaryQuery = `INSERT INTO messages (id, session_id, seq, role, content, summary, token_estimate, created_at)
VALUES ($1, $2, $3, 'system', $4, $5, 200, $6)`

const seedLastSeqQuery = `UPDATE sessions SET last_seq = $2 WHERE id = $1`

// BenchmarkPromptBuild measures assembling a turn's prompt (model, tools,
// system prompt, and the live context: the latest summary and the 20
// messages after it) for sessions with 0, 1,000 and 100,000 archived
// messages. The archive is never read, so the three should be flat. Run it
// with
//
//	go test -run '^$' -bench BenchmarkPromptBuild ./agent/
//
// (set PARLEY_TEST_POSTGRES_URL to include PostgreSQL).
func BenchmarkPromptBuild(b *testing.B) {
	for _, e := range dbtest.Engines() {
		b.Run(e.Name, func(b *testing.B) {
			for _, archived := range []int{0, 1_000, 100_000} {
				b.Run(fmt.Sprintf("archived=%d", archived), func(b *testing.B) {
					benchPromptBuild(b, e.Open(b), archived)
				})
			}
		})
	}
}

func benchPromptBuild(b *testing.B, db *dbutil.DB, archived int) {
	ctx := context.Background()
	store := sessions.NewStore(db)
	model := echo.New()
	r := New(Options{Store: store, Models: func(string) (llm.Model, error) { return model, nil }, DefaultModel: "echo",
		Tools: tools.NewRegistry()})
	sess, _, err := store.Resolve(ctx, sessions.CLIKey("u1", "a1"), sessions.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("a typical message in a long conversation ", 6)
	if archived > 0 {
		if _, err := db.Writer().ExecContext(ctx, seedArchiveQuery, sess.ID, archived, text, dbutil.Millis(testNow)); err != nil {
			b.Fatalf("seed the archive: %v", err)
		}
		if _, err := db.Writer().ExecContext(ctx, seedSummaryQuery, uuid.Must(uuid.NewV7()).String(), sess.ID, archived, "## Goal\nA summary.", true,
			dbutil.Millis(testNow)); err != nil {
			b.Fatalf("seed the summary: %v", err)
		}
		if _, err := db.Writer().ExecContext(ctx, seedLastSeqQuery, sess.ID, archived); err != nil {
			b.Fatal(err)
		}
		if db.Dialect == dbutil.Postgres {
			if _, err := db.Writer().ExecContext(ctx, "ANALYZE message_archive"); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range 20 {
		role := sessions.RoleUser
		if i%2 == 1 {
			role = sessions.RoleAssistant
		}
		if _, err := store.Append(ctx, sess.ID, sessions.Message{Role: role, Content: text}); err != nil {
			b.Fatal(err)
		}
	}
	req := Request{Session: sess, Agent: AgentConfig{Prompt: "You are a benchmark.", MaxContextTokens: 128_000}}
	b.ResetTimer()
	for b.Loop() {
		t := &turn{r: r, req: req, id: sess.ID, pctx: ctx}
		if err := t.prepare(ctx, true); err != nil {
			b.Fatal(err)
		}
		if want := 20 + min(archived, 1); len(t.call.Messages) != want {
			b.Fatalf("prompt has %d messages, want %d", len(t.call.Messages), want)
		}
	}
}
