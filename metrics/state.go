package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is what the daemon reads of its parts at a scrape, for the
// gauges an operator's alerts watch: the outbox, the channels, the
// replicas, the data disk and spend against the caps.
type State struct {
	// OutboxPending and OutboxFailed count replies waiting to be sent and
	// given up for good; OutboxOldest is when the oldest pending one was
	// queued (zero with none).
	OutboxPending, OutboxFailed int
	OutboxOldest                time.Time
	// Channels are the channels this replica runs or stands by for, each
	// up (healthy, or standing by while another replica runs it) or down.
	Channels map[string]bool
	// Replicas is how many replicas are live (0 without replicas), Held
	// the channels this one holds, Fenced whether it was fenced.
	Replicas, Held int
	Fenced         bool
	// DiskFree and DiskSize are the bytes free and in all on the disk the
	// data lives on (SQLite's file, the file store's directory); 0 when it
	// is not on this host (PostgreSQL).
	DiskFree, DiskSize uint64
	// Spend is each agent with a daily cap: today's spend and the cap.
	Spend []AgentSpend
}

// AgentSpend is an agent's spend today against its daily cap, in USD.
type AgentSpend struct {
	Agent       string
	USD, CapUSD float64
}

// stateTimeout bounds one scrape's read of the state: a database out of
// reach leaves these gauges out of that scrape, not the scrape hanging.
const stateTimeout = 5 * time.Second

// SetState sets the function the state gauges read at each scrape. It
// runs on the scraping goroutine with a deadline; an error leaves the
// gauges out of that scrape (promhttp_metric_handler_errors_total counts
// it). nil leaves them out.
func (m *Metrics) SetState(f func(ctx context.Context) (State, error)) {
	if f == nil {
		m.state.Store(nil)
		return
	}
	m.state.Store(&f)
}

// stateCollector turns State into gauges at each scrape.
type stateCollector struct {
	f *atomic.Pointer[func(ctx context.Context) (State, error)]

	pending, failed, oldest, channelUp, replicas, held, fenced, diskFree, diskSize, spend, spendCap *prometheus.Desc
}

func newStateCollector(f *atomic.Pointer[func(ctx context.Context) (State, error)]) *stateCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &stateCollector{f: f,
		pending: d("parley_outbox_pending", "Replies waiting in the outbox to be sent."),
		failed:  d("parley_outbox_failed", "Replies given up for good after their attempts (parley outbox retry sends one again)."),
		oldest:  d("parley_outbox_oldest_pending_age_seconds", "Age of the oldest reply waiting in the outbox; 0 with none."),
		channelUp: d("parley_channel_up",
			"Whether a channel is up: 1 connected and healthy (or standing by while another replica runs it), 0 down.", "channel"),
		replicas: d("parley_replicas_live", "Live replicas sharing this database, this one included; 0 without replicas."),
		held:     d("parley_replica_channels_held", "Channels this replica holds and runs."),
		fenced:   d("parley_replica_fenced", "1 once this replica's lease lapsed and another took its work over (it stops); 0 otherwise."),
		diskFree: d("parley_data_disk_free_bytes", "Bytes free on the disk the data lives on (SQLite's database); absent on PostgreSQL."),
		diskSize: d("parley_data_disk_size_bytes", "Size of the disk the data lives on (SQLite's database); absent on PostgreSQL."),
		spend:    d("parley_agent_spend_today_usd", "An agent's spend today (UTC), for agents with a daily cap.", "agent"),
		spendCap: d("parley_agent_spend_cap_usd", "An agent's daily spend cap.", "agent"),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.failed, c.oldest, c.channelUp, c.replicas, c.held, c.fenced, c.diskFree, c.diskSize, c.spend, c.spendCap} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.f.Load()
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	st, err := (*f)(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.pending, err)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.pending, float64(st.OutboxPending))
	gauge(c.failed, float64(st.OutboxFailed))
	age := 0.0
	if !st.OutboxOldest.IsZero() {
		age = max(time.Since(st.OutboxOldest).Seconds(), 0)
	}
	gauge(c.oldest, age)
	for id, up := range st.Channels {
		gauge(c.channelUp, b2f(up), label(id))
	}
	gauge(c.replicas, float64(st.Replicas))
	gauge(c.held, float64(st.Held))
	gauge(c.fenced, b2f(st.Fenced))
	if st.DiskSize > 0 {
		gauge(c.diskFree, float64(st.DiskFree))
		gauge(c.diskSize, float64(st.DiskSize))
	}
	for _, s := range st.Spend {
		gauge(c.spend, s.USD, label(s.Agent))
		gauge(c.spendCap, s.CapUSD, label(s.Agent))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
