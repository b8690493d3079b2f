package daemon

import (
	"context"
	"errors"

	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/metrics"
)

// metricsState is what the state gauges read at a scrape (see
// metrics.State): the outbox, the channels, the replicas, the data disk
// and spend against the agent cap.
func (d *Daemon) metricsState(ctx context.Context) (metrics.State, error) {
	var st metrics.State
	b, err := d.store.Backlog(ctx)
	if err != nil {
		return st, err
	}
	st.OutboxPending, st.OutboxFailed, st.OutboxOldest = b.Pending, b.Failed, b.OldestPending
	st.Channels = map[string]bool{}
	for id, a := range d.adapters {
		up := true
		if h, ok := a.(interface{ Health() (bool, string) }); ok {
			up, _ = h.Health()
		}
		st.Channels[string(id)] = up || d.runElsewhere(id)
	}
	if m := d.replicas.Member(); m != nil {
		live, err := d.replicas.Live(ctx)
		if err != nil {
			return st, err
		}
		st.Replicas = len(live)
		held, _ := d.replicas.ClaimChannels()
		st.Held = len(held)
		st.Fenced = errors.Is(m.Alive(), cluster.ErrFenced)
	}
	st.DiskFree, st.DiskSize, _ = d.db.Disk()
	var agents []string
	for _, a := range d.cfg().Agents {
		agents = append(agents, a.ID)
	}
	spend, err := d.budget.AgentsToday(ctx, agents)
	if err != nil {
		return st, err
	}
	for _, s := range spend {
		st.Spend = append(st.Spend, metrics.AgentSpend{Agent: s.Agent, Today: s.USD, DayCap: s.CapUSD})
	}
	return st, nil
}
