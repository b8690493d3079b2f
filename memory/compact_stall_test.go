package memory

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/openai"
	"github.com/parleyd/parley/llm/stalltest"
)

// The memory flush and the summarizer, on a provider that stalls each way,
// hold a compaction only for their deadlines: with a fallback model set,
// each call is retried and then the fallback answers (the flush saves its
// memory, the summary is written); with none, the flush and the summary
// end at their own shorter deadlines, nothing is compacted, the history is
// as it was and the log says so. Either way the session takes the next
// message at once.
func TestStalledFlushAndSummary(t *testing.T) {
	const attempts = 3 // the runner's and the compactor's default
	short := llm.Timeouts{Connect: 100 * time.Millisecond, FirstByte: 100 * time.Millisecond,
		Idle: 100 * time.Millisecond, Total: 400 * time.Millisecond}
	long := llm.Timeouts{Connect: time.Hour, FirstByte: time.Hour, Idle: time.Hour, Total: time.Hour}
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		for _, way := range stalltest.Ways {
			limit := short.FirstByte
			if way == stalltest.Drips {
				limit = short.Total
			}
			t.Run(string(way)+"/through the fallback", func(t *testing.T) {
				stalled := stalltest.Stall(t, way, 20*time.Millisecond)
				e := newCompactEnv(t, open)
				e.models = map[string]llm.Model{"openai/stalled": openai.New(openai.Options{BaseURL: stalled.BaseURL(), Timeouts: stalltest.Timeouts(way, short)})}
				e.cfg.MaxContextTokens = 100_000
				e.fill(8)
				cfg := e.cfg
				cfg.Model, cfg.FallbackModels = "openai/stalled", []string{"echo"}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				start := time.Now()
				res, err := e.runner.Compact(ctx, e.sess, cfg)
				took := time.Since(start)
				if err != nil || !res.Compacted || res.Memories != 1 || e.flushes != 1 || len(e.summaryReqs) != 1 {
					t.Fatalf("Compact = %+v, %v (%d flushes, %d summaries by the fallback)", res, err, e.flushes, len(e.summaryReqs))
				}
				if n := stalled.Requests(); n != 2*attempts {
					t.Errorf("the stalled provider got %d requests, want %d for the flush and %d for the summary", n, attempts, attempts)
				}
				if max := 2*attempts*limit + 3*time.Second; took < 2*attempts*limit || took > max {
					t.Errorf("the compaction took %s; want its calls' deadlines (%s each, %d calls) and little more", took, limit, 2*attempts)
				}
				e.mustSay(9)
				if st := e.runner.Status(e.sess.ID); st.State != agent.StateIdle {
					t.Errorf("status %+v, want idle", st)
				}
			})
			t.Run(string(way)+"/past the flush's and the summary's deadlines", func(t *testing.T) {
				stalled := stalltest.Stall(t, way, 20*time.Millisecond)
				e := newCompactEnv(t, open)
				e.models = map[string]llm.Model{"openai/stalled": openai.New(openai.Options{BaseURL: stalled.BaseURL(), Timeouts: long})}
				e.cfg.MaxContextTokens = 100_000
				e.fill(8)
				before := e.live()
				cfg := e.cfg
				cfg.Model = "openai/stalled"
				cfg.Compaction.FlushTimeout, cfg.Compaction.SummaryTimeout = 300*time.Millisecond, 300*time.Millisecond
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				start := time.Now()
				res, err := e.runner.Compact(ctx, e.sess, cfg)
				took := time.Since(start)
				if err == nil || res.Compacted || !strings.Contains(err.Error(), "the summary took longer than 300ms") {
					t.Fatalf("Compact = %+v, %v; want the summary's deadline passed", res, err)
				}
				if took < 600*time.Millisecond || took > 3*time.Second {
					t.Errorf("the compaction took %s; want its two 300ms deadlines and little more", took)
				}
				if e.archived() != 0 || e.summaryItems() != 0 || e.session().CompactionSummary != "" ||
					!slices.Equal(ids(conversation(e.live())), ids(before)) {
					t.Fatal("a compaction that timed out changed the history")
				}
				logs := e.logs.String()
				for _, want := range []string{"memory flush passed its deadline; compacting without it",
					"compaction timed out; nothing was compacted and the history is as it was"} {
					if !strings.Contains(logs, want) {
						t.Errorf("the log does not say %q:\n%s", want, logs)
					}
				}
				e.mustSay(9)
				if st := e.runner.Status(e.sess.ID); st.State != agent.StateIdle {
					t.Errorf("status %+v, want idle", st)
				}
			})
		}
	})
}
