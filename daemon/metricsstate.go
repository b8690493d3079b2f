package daemon

import (
	"context"

	"github.com/parleyd/parley/metrics"
	"github.com/parleyd/parley/status"
)

// metricsState is what the state gauges read at a scrape (metrics.State).
func (d *Daemon) metricsState(ctx context.Context) (st metrics.State, err error) {
	b, err := d.store.Backlog(ctx)
	if err != nil {
		return st, err
	}
	st.OutboxPending, st.OutboxFailed, st.OutboxOldest = b.Pending, b.Failed, b.OldestPending
	st.Channels = map[string]bool{}
	for _, c := range status.Channels(d.adapters, d.runElsewhere) {
		st.Channels[c.ID] = c.Healthy
	}
	if st.Replicas, st.Held, st.Fenced, err = d.replicas.Gauges(ctx); err != nil {
		return st, err
	}
	st.DiskFree, st.DiskSize, _ = d.db.Disk()
	spend, err := d.budget.AgentsToday(ctx, d.cfg().AgentIDs())
	for _, s := range spend {
		st.Spend = append(st.Spend, metrics.AgentSpend(s))
	}
	return st, err
}
