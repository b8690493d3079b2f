package admin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// BenchmarkReadStats reads the usage page's numbers over 14 days holding
// 20,000 replies and 20,000 messages received (as many again outside the
// window), on SQLite.
func BenchmarkReadStats(b *testing.B) {
	const n = 20000
	ctx := context.Background()
	db := dbtest.SQLite(b)
	now := time.Now()
	store := sessions.NewStore(db)
	s, _, err := store.Resolve(ctx, sessions.ChatKey("telegram", "1", "1", "default"), sessions.Policy{})
	if err != nil {
		b.Fatal(err)
	}
	err = db.Tx(ctx, func(q dbutil.Querier) error {
		for i := range 2 * n {
			// Half within the last 14 days, half in the 14 before.
			at := dbutil.Millis(now.Add(-time.Duration(i) * (28 * 24 * time.Hour / (2 * n))))
			if _, err := q.ExecContext(ctx, `INSERT INTO messages (id, session_id, seq, role, content, model, usage, created_at)
				VALUES ($1, $2, $3, 'assistant', 'x', 'openai/gpt-test', '{"input":120,"output":30,"cost_usd":0.001}', $4)`,
				fmt.Sprintf("m%06d", i), s.ID, i+1, at); err != nil {
				return err
			}
			if _, err := q.ExecContext(ctx, insertInboundQuery, fmt.Sprintf("i%06d", i), "tg", "c", fmt.Sprint(i), "done", string(s.ID), "", at, at+1500); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		st, err := readStats(ctx, db, windowDays, ByAgent, now, nil)
		if err != nil {
			b.Fatal(err)
		}
		if got := sum(st.Turns["default"]); got < n*13/14 || got > n {
			b.Fatalf("turns %v, want %d", got, n)
		}
	}
}
