package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// benchMemories is how many memories are stored before Search is measured:
// half in one big scope, half spread over benchSmallScopes scopes of
// benchMemories/2/benchSmallScopes each.
const (
	benchMemories    = 100_000
	benchSmallScopes = 500
	benchVocabulary  = 5000
	benchSeedBatch   = 500
)

// BenchmarkSearch measures Store.Search (index query plus loading the hits)
// on the built-in index over 100,000 stored memories, in a scope holding
// 50,000 of them and in one holding 100. Run it with
//
//	go test -run '^$' -bench BenchmarkSearch ./memory/
//
// (set PARLEY_TEST_POSTGRES_URL to include PostgreSQL).
func BenchmarkSearch(b *testing.B) {
	for _, e := range dbtest.Engines() {
		b.Run(e.Name, func(b *testing.B) {
			ctx := context.Background()
			db := e.Open(b)
			words := benchWords()
			seedMemories(b, db, words)
			if db.Dialect == dbutil.Postgres {
				// As autovacuum would after a bulk load, so the planner knows the table.
				if _, err := db.Writer().ExecContext(ctx, "ANALYZE memory_items"); err != nil {
					b.Fatal(err)
				}
			}
			s := builtinStore(b, db, newClock()) // builds the full-text index over the seeded rows
			queries := benchQueries(words)
			for _, sc := range []struct {
				name  string
				scope Scope
			}{
				{fmt.Sprintf("scope=%d", benchMemories/2), benchScope(-1)},
				{fmt.Sprintf("scope=%d", benchMemories/2/benchSmallScopes), benchScope(7)},
			} {
				b.Run(sc.name, func(b *testing.B) {
					lat := make([]time.Duration, 0, 4096)
					found, i := 0, 0
					for b.Loop() {
						start := time.Now()
						res, err := s.Search(ctx, sc.scope, queries[i%len(queries)], DefaultSearchLimit)
						lat = append(lat, time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						found += len(res)
						i++
					}
					if found == 0 {
						b.Fatal("no search found anything: the benchmark measures nothing")
					}
					reportLatency(b, lat)
				})
			}
		})
	}
}

// reportLatency adds p50 and p99 per-search latencies to the benchmark.
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// benchScope is the big scope for -1, else small scope i.
func benchScope(i int) Scope {
	if i < 0 {
		return Scope{Agent: "default", User: "user:telegram:big"}
	}
	return Scope{Agent: "default", User: "user:telegram:small" + strconv.Itoa(i)}
}

// benchWords is a made-up vocabulary, most common first.
func benchWords() []string {
	syllables := []string{"ka", "lo", "mi", "ne", "ru", "ta", "so", "vi", "pe", "da", "go", "ze", "bu", "fa", "hi", "jo", "wy", "xa", "qu", "ri"}
	words := make([]string, benchVocabulary)
	for i := range words {
		n := i
		var w strings.Builder
		for range 3 {
			w.WriteString(syllables[n%len(syllables)])
			n /= len(syllables)
		}
		words[i] = w.String() + strconv.Itoa(i%7)
	}
	return words
}

// benchQueries mixes a common and a rarer word, as a model's searches for a
// name plus a topic tend to.
func benchQueries(words []string) []string {
	rng := rand.New(rand.NewPCG(3, 4))
	q := make([]string, 256)
	for i := range q {
		q[i] = words[10+rng.IntN(190)] + " " + words[200+rng.IntN(3000)]
		if i%4 == 0 {
			q[i] += " " + words[rng.IntN(50)]
		}
	}
	return q
}

// seedMemories stores benchMemories memories with Zipf-distributed words,
// in multi-row inserts inside one transaction per engine batch.
func seedMemories(b testing.TB, db *dbutil.DB, words []string) {
	b.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 2, uint64(len(words)-1))
	const cols = 11
	row := func(i int) []any {
		scope := benchScope(-1)
		if i%2 == 1 {
			scope = benchScope(i / 2 % benchSmallScopes)
		}
		n := 8 + rng.IntN(24)
		text := make([]string, n)
		for j := range text {
			text[j] = words[zipf.Uint64()]
		}
		id, err := newID()
		if err != nil {
			b.Fatal(err)
		}
		at := dbutil.Millis(t0.Add(time.Duration(i) * time.Second))
		return []any{string(id), scope.Agent, scope.User, scope.Workspace, scope.key(), strings.Join(text, " "),
			`["` + words[rng.IntN(100)] + `"]`, "bench-session", "", at, at}
	}
	err := db.Tx(ctx, func(q dbutil.Querier) error {
		for start := 0; start < benchMemories; start += benchSeedBatch {
			var sql strings.Builder
			sql.WriteString(`INSERT INTO memory_items (id, agent_id, user_id, workspace_id, scope_key, content, tags,
				source_session_id, source_message_id, created_at, updated_at) VALUES `)
			args := make([]any, 0, benchSeedBatch*cols)
			for i := start; i < min(start+benchSeedBatch, benchMemories); i++ {
				if i > start {
					sql.WriteString(", ")
				}
				sql.WriteString("(")
				for c := range cols {
					if c > 0 {
						sql.WriteString(", ")
					}
					sql.WriteString("$" + strconv.Itoa(len(args)+c+1))
				}
				sql.WriteString(")")
				args = append(args, row(i)...)
			}
			if _, err := q.ExecContext(ctx, sql.String(), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatalf("seed %d memories: %v", benchMemories, err)
	}
}
