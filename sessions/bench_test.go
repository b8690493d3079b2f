package sessions_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// benchSessions is how many sessions are stored before Resolve is measured.
const benchSessions = 100_000

var benchNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// seedSessionsQuery stores n active sessions in one statement on either engine.
const seedSessionsQuery = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
INSERT INTO sessions (id, user_id, agent_id, surface, surface_id, status, last_active_at, created_at, updated_at)
SELECT 'bench-' || i, 'u' || i, 'default', 'telegram', 'c' || i, 'active', $2, $2, $2 FROM n`

func seed(b *testing.B, db *dbutil.DB, n int) {
	b.Helper()
	if _, err := db.Writer().ExecContext(context.Background(), seedSessionsQuery, n, dbutil.Millis(benchNow)); err != nil {
		b.Fatalf("seed %d sessions: %v", n, err)
	}
}

// reportLatency adds p50 and p99 per-operation latencies to the benchmark.
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

func benchEngines(b *testing.B, fn func(b *testing.B, db *dbutil.DB)) {
	for _, e := range dbtest.Engines() {
		b.Run(e.Name, func(b *testing.B) { fn(b, e.Open(b)) })
	}
}

// BenchmarkResolve resolves existing sessions among 100,000 stored ones,
// with both resets on: the path every inbound message takes.
func BenchmarkResolve(b *testing.B) {
	benchEngines(b, func(b *testing.B, db *dbutil.DB) {
		seed(b, db, benchSessions)
		store := sessions.NewStore(db, sessions.WithClock(func() time.Time { return benchNow }))
		policy := sessions.Policy{IdleTimeout: time.Hour, DailyReset: true, DailyResetHour: 4, Location: time.UTC}
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			n := i*7919%benchSessions + 1 // spread over the whole table
			key := sessions.ChatKey("telegram", fmt.Sprintf("c%d", n), fmt.Sprintf("u%d", n), "default")
			start := time.Now()
			_, isNew, err := store.Resolve(ctx, key, policy)
			lat = append(lat, time.Since(start))
			if err != nil || isNew {
				b.Fatalf("resolve %s: new=%v %v", key, isNew, err)
			}
		}
		b.StopTimer()
		reportLatency(b, lat)
	})
}

// BenchmarkAppend appends durable messages (a commit each, with the
// engine's configured durability) to sessions among 100,000 stored ones.
func BenchmarkAppend(b *testing.B) {
	text := strings.Repeat("a typical chat message ", 10)
	benchEngines(b, func(b *testing.B, db *dbutil.DB) {
		seed(b, db, benchSessions)
		store := sessions.NewStore(db, sessions.WithClock(func() time.Time { return benchNow }))
		ctx := context.Background()
		b.Run("serial", func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				id := sessions.ID(fmt.Sprintf("bench-%d", i%1000+1))
				start := time.Now()
				_, err := store.Append(ctx, id, sessions.Message{Role: sessions.RoleUser, Content: text})
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportLatency(b, lat)
		})
		b.Run("parallel", func(b *testing.B) {
			var next int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := atomicAdd(&next)
					id := sessions.ID(fmt.Sprintf("bench-%d", i%1000+1))
					if _, err := store.Append(ctx, id, sessions.Message{Role: sessions.RoleUser, Content: text}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	})
}

func atomicAdd(p *int64) int64 { return atomic.AddInt64(p, 1) }

// benchHistory is how many messages the paged session holds.
const benchHistory = 20_000

// seedMessagesQuery stores $1 messages in session bench-1 (and sets its
// counters) on either engine.
const seedMessagesQuery = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
INSERT INTO messages (id, session_id, seq, role, content, token_estimate, created_at)
SELECT 'm-' || i, 'bench-1', i, CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END, 'message ' || i, 3, $2 FROM n`

// BenchmarkHistoryPage reads a page of 50 messages from the middle of a
// session of 20,000, as GET /v1/sessions/{id}/messages does, against the
// whole history read that a page used to cost.
func BenchmarkHistoryPage(b *testing.B) {
	benchEngines(b, func(b *testing.B, db *dbutil.DB) {
		seed(b, db, 1)
		ctx := context.Background()
		if _, err := db.Writer().ExecContext(ctx, seedMessagesQuery, benchHistory, dbutil.Millis(benchNow)); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Writer().ExecContext(ctx, `UPDATE sessions SET last_seq = $1, message_count = $1 WHERE id = 'bench-1'`, benchHistory); err != nil {
			b.Fatal(err)
		}
		store := sessions.NewStore(db, sessions.WithHistoryCache(0))
		after := &sessions.Position{Seq: benchHistory / 2}
		for _, bc := range []struct {
			name string
			opts sessions.MessagesOptions
			want int
		}{
			{"page", sessions.MessagesOptions{Limit: 50, After: after}, 50},
			{"whole", sessions.MessagesOptions{}, benchHistory},
		} {
			b.Run(bc.name, func(b *testing.B) {
				for b.Loop() {
					msgs, err := store.Messages(ctx, "bench-1", bc.opts)
					if err != nil || len(msgs) != bc.want {
						b.Fatalf("%d messages (%v), want %d", len(msgs), err, bc.want)
					}
				}
			})
		}
	})
}
