// Package status is a running daemon's live state as `parley status`,
// GET /v1/status and the dashboard show it: its channels and their
// health, the lanes and what waits in them, the runs, the outbox, the
// cron jobs and the last reload. Snapshot reads it from the parts that
// keep it.
package status

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/metrics"
	"github.com/parleyd/parley/sessions"
)

// Status is a running daemon's live state.
type Status struct {
	Version  string          `json:"version"`
	Started  time.Time       `json:"started"`
	Listen   string          `json:"listen"`
	Replica  string          `json:"replica"`
	Engine   string          `json:"engine"`
	Channels []ChannelStatus `json:"channels"`
	Lanes    int             `json:"lanes"`  // sessions with a turn running or waiting
	Queued   int             `json:"queued"` // messages waiting in them
	Runs     []RunStatus     `json:"runs"`
	Outbox   gateway.Backlog `json:"outbox"`
	CronJobs []CronStatus    `json:"cron_jobs"`
	// Reloaded is when the config was last reloaded (zero: never), and
	// ReloadError why that failed.
	Reloaded    time.Time `json:"reloaded,omitzero"`
	ReloadError string    `json:"reload_error,omitempty"`
}

// ChannelStatus is one channel and its health.
type ChannelStatus struct {
	ID      string `json:"id"`
	Healthy bool   `json:"healthy"`
	Detail  string `json:"detail,omitempty"`
}

// RunStatus is a session whose agent is not idle.
type RunStatus struct {
	SessionID string       `json:"session_id"`
	Status    agent.Status `json:"status"`
}

// CronStatus is a job and its next fire.
type CronStatus struct {
	ID       string    `json:"id"`
	Schedule string    `json:"schedule"`
	Enabled  bool      `json:"enabled"`
	Next     time.Time `json:"next,omitzero"`
}

// Sources are where a snapshot reads the live state from.
type Sources struct {
	// Status carries what the daemon knows of itself: its version, start,
	// address, replica id, engine and last reload; Snapshot fills the rest.
	Status
	Channels map[adapters.ID]adapters.Adapter
	// Elsewhere says a channel is run by another replica (nil: none is).
	Elsewhere func(adapters.ID) bool
	Gateway   *gateway.Gateway
	Outbox    *gateway.Store
	Runs      func() map[sessions.ID]agent.Status
	Cron      *cron.Store // nil: no cron
}

// Channels are the channels and their health, by id: one another replica
// runs (elsewhere; nil for none) stands by, healthy.
func Channels(channels map[adapters.ID]adapters.Adapter, elsewhere func(adapters.ID) bool) []ChannelStatus {
	out := []ChannelStatus{}
	for id, a := range channels {
		c := ChannelStatus{ID: string(id), Healthy: true}
		if h, ok := a.(interface{ Health() (bool, string) }); ok {
			c.Healthy, c.Detail = h.Health()
		}
		if elsewhere != nil && elsewhere(id) {
			c.Healthy, c.Detail = true, "standby: another replica runs it"
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ChannelStatus) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Gauges are what the metrics' state gauges read at a scrape
// (metrics.State): the outbox, the channels, the replicas (node nil:
// none), the data disk and spend against the agent cap (spend nil: none).
func Gauges(ctx context.Context, src Sources, node *cluster.Node, db *dbutil.DB,
	spend func(context.Context) ([]metrics.AgentSpend, error)) (st metrics.State, err error) {
	b, err := src.Outbox.Backlog(ctx)
	if err != nil {
		return st, err
	}
	st.OutboxPending, st.OutboxFailed, st.OutboxOldest = b.Pending, b.Failed, b.OldestPending
	st.Channels = map[string]bool{}
	for _, c := range Channels(src.Channels, src.Elsewhere) {
		st.Channels[c.ID] = c.Healthy
	}
	if st.Replicas, st.Held, st.Fenced, err = node.Gauges(ctx); err != nil {
		return st, err
	}
	st.DiskFree, st.DiskSize, _ = db.Disk()
	if spend != nil {
		st.Spend, err = spend(ctx)
	}
	return st, err
}

// Snapshot is the live state now.
func Snapshot(ctx context.Context, src Sources) (Status, error) {
	st := src.Status
	st.Lanes, st.Queued = src.Gateway.ActiveLanes(), src.Gateway.QueueDepth()
	st.Channels, st.Runs, st.CronJobs = []ChannelStatus{}, []RunStatus{}, []CronStatus{}
	st.Channels = Channels(src.Channels, src.Elsewhere)
	for id, s := range src.Runs() {
		st.Runs = append(st.Runs, RunStatus{SessionID: string(id), Status: s})
	}
	slices.SortFunc(st.Runs, func(a, b RunStatus) int { return cmp.Compare(a.SessionID, b.SessionID) })
	var err error
	if st.Outbox, err = src.Outbox.Backlog(ctx); err != nil {
		return st, err
	}
	if src.Cron != nil {
		jobs, err := src.Cron.List(ctx)
		if err != nil {
			return st, err
		}
		now := time.Now()
		for _, j := range jobs {
			c := CronStatus{ID: j.ID, Schedule: j.Schedule, Enabled: j.Enabled()}
			if s, err := j.ParsedSchedule(); err == nil && j.Enabled() {
				c.Next = s.Next(now)
			}
			st.CronJobs = append(st.CronJobs, c)
		}
	}
	return st, nil
}
