// Package metrics exposes parley's Prometheus metrics through the
// Prometheus Go client (client_golang), with its Go runtime and process
// collectors beside them, in a registry of each Metrics' own. The rest of the code never sees the format: the daemon hands
// this package the event bus (Feed), a database observer (ObserveDB), a
// model factory (Models) and a few plain calls for what only it sees (sends,
// reconnects, retries...).
//
// Every label value is an id or an enum (agent id, adapter id, model spec,
// status); anything that doesn't look like one is exported as "other", so no
// message text or secret can end up in a series.
package metrics

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/dbutil"
)

// Turn outcomes, the outcome label of parley_turns_total.
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomeAborted = "aborted"
)

// Token kinds, the kind label of parley_tokens_total.
const (
	TokensPrompt     = "prompt"
	TokensCompletion = "completion"
	TokensReasoning  = "reasoning"
	TokensCacheRead  = "cache_read"
	TokensCacheWrite = "cache_write"
)

// Bucket sets, in seconds.
var (
	turnBuckets       = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
	modelBuckets      = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}
	firstTokenBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	storeBuckets      = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	sendBuckets       = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	compactionBuckets = []float64{0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}
)

// Metrics holds parley's metrics in a registry of its own.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	now     func() time.Time

	turns          *prometheus.CounterVec   // agent, outcome
	turnDuration   *prometheus.HistogramVec // agent, outcome
	modelCall      *prometheus.HistogramVec // provider, model, outcome
	modelFirstTok  *prometheus.HistogramVec // provider, model
	storeWait      *prometheus.HistogramVec // op
	adapterSend    *prometheus.HistogramVec // adapter, outcome
	compactions    *prometheus.CounterVec   // trigger
	compactionTime prometheus.Histogram
	tokens         *prometheus.CounterVec // kind, provider, model
	adapterErrors  *prometheus.CounterVec // adapter
	reconnects     *prometheus.CounterVec // adapter
	duplicates     prometheus.Counter
	outboxRetries  prometheus.Counter
	// outboxReclaimed counts replies a crash interrupted mid-send.
	outboxReclaimed prometheus.Counter
	webhooks        *prometheus.CounterVec // status
	cronRuns        *prometheus.CounterVec // status
	budgetRefusals  *prometheus.CounterVec // scope
	webhookRefused  *prometheus.CounterVec // hook, reason

	cost      *prometheus.CounterVec // agent, provider, model
	fallbacks *prometheus.CounterVec // agent, model, fallback
	// live is each model's calls in flight and latest outcomes, and the
	// times of the latest fallbacks, for the dashboard.
	live liveCalls

	queue, lanes atomic.Pointer[func() int]
	state        atomic.Pointer[func(ctx context.Context) (State, error)]
	// price prices a call's tokens whose provider reported no cost.
	price atomic.Pointer[func(spec string, input, output int64) (usd float64, ok bool)]
	// historyCache and checkpoints read two counts each at a scrape.
	historyCache, checkpoints atomic.Pointer[func() (int64, int64)]

	// afterEvent, when set (by tests, before Feed), runs after each event Feed
	// has handled.
	afterEvent func()
}

// New returns a Metrics with every parley_ metric registered in a fresh
// registry, beside the Go runtime's (go_*) and the process's (process_*)
// collectors; Handler adds the scrapes' own (promhttp_*).
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), now: time.Now}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := promauto.With(m.reg)
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	counter := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	histogramVec := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return f.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}

	m.turns = counterVec("parley_turns_total",
		"Agent turns finished, by agent and outcome (ok, error, aborted).", "agent", "outcome")
	m.turnDuration = histogramVec("parley_turn_duration_seconds",
		"Wall time of an agent turn, from its start to its end (tools and model calls included).", turnBuckets, "agent", "outcome")
	m.modelCall = histogramVec("parley_model_call_duration_seconds",
		"Wall time of one model call (one attempt; retries are separate calls), by provider, model and outcome.", modelBuckets, "provider", "model", "outcome")
	m.modelFirstTok = histogramVec("parley_model_first_token_seconds",
		"Time from the start of a model call to its first streamed text, by provider and model.", firstTokenBuckets, "provider", "model")
	m.storeWait = histogramVec("parley_store_wait_duration_seconds",
		"Time a caller waited on the database, by op: write (a transaction, from queueing to durable commit) or read.", storeBuckets, "op")
	m.adapterSend = histogramVec("parley_adapter_send_duration_seconds",
		"Wall time of one outbound send through an adapter, by adapter id and outcome (ok, error).", sendBuckets, "adapter", "outcome")
	m.compactions = counterVec("parley_compactions_total",
		"Context compactions done, by trigger (before_turn, after_turn, manual).", "trigger")
	m.compactionTime = f.NewHistogram(prometheus.HistogramOpts{Name: "parley_compaction_duration_seconds",
		Help: "Wall time of one context compaction (memory flush and summary included).", Buckets: compactionBuckets})
	m.tokens = counterVec("parley_tokens_total",
		"Model tokens used, by kind (prompt, completion, reasoning, cache_read, cache_write), provider and model.", "kind", "provider", "model")
	m.adapterErrors = counterVec("parley_adapter_errors_total",
		"Errors an adapter reported outside a send, by adapter id.", "adapter")
	m.reconnects = counterVec("parley_adapter_reconnects_total",
		"Adapter reconnections, by adapter id.", "adapter")
	m.duplicates = counter("parley_inbound_duplicates_dropped_total",
		"Inbound messages dropped because they had been received before.")
	m.outboxRetries = counter("parley_outbox_retries_total",
		"Outbound replies scheduled for another attempt after a failed send.")
	m.outboxReclaimed = counter("parley_outbox_reclaimed_total",
		"Replies a crash interrupted mid-send, taken back at the next start; each may reach its chat twice.")
	m.webhooks = counterVec("parley_webhook_deliveries_total",
		"Webhook deliveries, by status.", "status")
	m.cronRuns = counterVec("parley_cron_runs_total",
		"Cron job runs, by status.", "status")
	m.budgetRefusals = counterVec("parley_budget_refusals_total",
		"Turns refused because a daily spend cap was reached, by scope (user, session, agent).", "scope")
	m.webhookRefused = counterVec("parley_webhook_refused_total",
		"Webhook requests refused, by hook id (unknown for a path naming no hook) and reason (the error code answered: unauthorized, stale, not_found, body_too_large, ...).", "hook", "reason")

	m.cost = counterVec("parley_cost_usd_total",
		"Spend on model calls in USD, at the configured prices, by agent, provider and model (summaries of compactions included).", "agent", "provider", "model")
	m.fallbacks = counterVec("parley_model_fallbacks_total",
		"Model calls handed to a fallback model after the agent's model failed (past its retries), by agent, the failed model and the fallback.", "agent", "model", "fallback")
	m.reg.MustRegister(newStateCollector(&m.state))

	// Series of known enums exist from the start, so rate() sees their
	// first increment.
	for _, op := range []dbutil.Op{dbutil.OpRead, dbutil.OpWrite} {
		m.storeWait.WithLabelValues(string(op))
	}
	for _, trigger := range []agent.CompactWhen{agent.CompactBeforeTurn, agent.CompactAfterTurn, agent.CompactManual} {
		m.compactions.WithLabelValues(string(trigger))
	}

	m.reg.MustRegister(newReadCounters("parley_history_cache_reads_total",
		"Reads of a conversation's recent history, by result: hit (answered from memory after one read of the session's row) or miss (its messages read from the database). "+
			"Misses that climb while hits stay flat mean more conversations take turns than database.history_cache_mb holds.",
		"result", []string{"hit", "miss"}, func() []float64 { return pair(&m.historyCache) }))
	m.reg.MustRegister(newReadCounters("parley_sqlite_checkpoints_total",
		"SQLite checkpoints (the write-ahead log copied back into the database) run beside the writer, by result (ok, failed). "+
			"Failures leave the log to grow until the writer's own checkpoint copies it; 0 on PostgreSQL.",
		"result", []string{"ok", "failed"}, func() []float64 { return pair(&m.checkpoints) }))
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "parley_queue_depth", Help: "Inbound messages waiting in the gateway's lanes, all sessions together."},
		func() float64 { return call(&m.queue) })
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "parley_active_lanes", Help: "Session lanes (one event loop per session) currently running."},
		func() float64 { return call(&m.lanes) })

	// A collector that fails leaves its families out of that scrape (and
	// counts in promhttp_metric_handler_errors_total), not the whole scrape.
	m.handler = promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:      m.reg,
		ErrorHandling: promhttp.ContinueOnError,
	}))
	return m
}

// SendObserved records one outbound send through adapter: how long it took
// and whether it failed. A failed send is not also an AdapterError.
func (m *Metrics) SendObserved(adapter string, took time.Duration, err error) {
	outcome := OutcomeOK
	if err != nil {
		outcome = OutcomeError
	}
	m.adapterSend.WithLabelValues(label(adapter), outcome).Observe(took.Seconds())
}

// AdapterError counts an error an adapter hit outside a send (a receive loop,
// a lost connection, a failed download...).
func (m *Metrics) AdapterError(adapter string) { m.adapterErrors.WithLabelValues(label(adapter)).Inc() }

// Reconnect counts an adapter reconnecting.
func (m *Metrics) Reconnect(adapter string) { m.reconnects.WithLabelValues(label(adapter)).Inc() }

// DuplicateDropped counts an inbound message dropped as already received.
func (m *Metrics) DuplicateDropped() { m.duplicates.Inc() }

// OutboxRetry counts an outbound reply rescheduled after a failed send.
func (m *Metrics) OutboxRetry() { m.outboxRetries.Inc() }

// OutboxReclaimed counts n replies taken back after a crash interrupted
// their send (each may have been delivered already).
func (m *Metrics) OutboxReclaimed(n int) { m.outboxReclaimed.Add(float64(n)) }

// WebhookDelivery counts a webhook delivery with its status (an enum such
// as accepted, answered, failed, or an HTTP status code).
func (m *Metrics) WebhookDelivery(status string) { m.webhooks.WithLabelValues(label(status)).Inc() }

// CronRun counts a finished cron run with its status (cron.Status: ok,
// error, skipped, timeout).
func (m *Metrics) CronRun(status string) { m.cronRuns.WithLabelValues(label(status)).Inc() }

// BudgetRefused counts a turn refused because a spend cap (scope: user,
// session or agent) was reached.
func (m *Metrics) BudgetRefused(scope string) { m.budgetRefusals.WithLabelValues(label(scope)).Inc() }

// SetPrice sets the function that prices a model call's tokens when its
// provider reported no cost (budgets.prices), for parley_cost_usd_total:
// input counts the prompt and cache tokens, output the completion and
// reasoning tokens. nil counts reported costs only.
func (m *Metrics) SetPrice(f func(spec string, input, output int64) (usd float64, ok bool)) {
	if f == nil {
		m.price.Store(nil)
		return
	}
	m.price.Store(&f)
}

// SetQueue sets the function parley_queue_depth reads at each scrape. It
// runs on the scraping goroutine, so it must be safe to call concurrently
// and cheap. nil reads as 0.
func (m *Metrics) SetQueue(f func() int) { set(&m.queue, f) }

// SetActiveLanes sets the function parley_active_lanes reads at each
// scrape, under the same rules as SetQueue.
func (m *Metrics) SetActiveLanes(f func() int) { set(&m.lanes, f) }

// SetHistoryCache sets the function parley_history_cache_reads_total
// reads at each scrape: the hits and the misses so far
// (sessions.SQLStore.HistoryCacheStats), under the same rules as SetQueue.
func (m *Metrics) SetHistoryCache(f func() (hits, misses int64)) { setPair(&m.historyCache, f) }

// SetCheckpoints sets the function parley_sqlite_checkpoints_total reads
// at each scrape: the checkpoints run and failed so far
// (dbutil.DB.CheckpointStats), under the same rules as SetQueue.
func (m *Metrics) SetCheckpoints(f func() (ran, failed int64)) { setPair(&m.checkpoints, f) }

func setPair(p *atomic.Pointer[func() (int64, int64)], f func() (int64, int64)) {
	if f == nil {
		p.Store(nil)
		return
	}
	p.Store(&f)
}

func pair(p *atomic.Pointer[func() (int64, int64)]) []float64 {
	if f := p.Load(); f != nil {
		a, b := (*f)()
		return []float64{float64(a), float64(b)}
	}
	return []float64{0, 0}
}

func set(p *atomic.Pointer[func() int], f func() int) {
	if f == nil {
		p.Store(nil)
		return
	}
	p.Store(&f)
}

func call(p *atomic.Pointer[func() int]) float64 {
	if f := p.Load(); f != nil {
		return float64((*f)())
	}
	return 0
}

// WebhookRefused counts a refused webhook request: the hook it named ("" for
// none that exists) and the reason, the error code it was answered with.
func (m *Metrics) WebhookRefused(hook, reason string) {
	m.webhookRefused.WithLabelValues(label(hook), label(reason)).Inc()
}
