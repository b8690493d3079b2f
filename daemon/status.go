package daemon

import (
	"cmp"
	"context"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/runfile"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/vault"
)

// Status is a running daemon's live state, for `parley status` and
// GET /v1/status.
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

// Snapshot is the daemon's live state now.
func (d *Daemon) Snapshot(ctx context.Context) (Status, error) {
	st := Status{Version: d.version, Started: d.started, Listen: d.listen, Replica: d.replicaID(d.cfg()),
		Engine: string(d.db.Dialect), Lanes: d.gw.ActiveLanes(), Queued: d.gw.QueueDepth(),
		Channels: []ChannelStatus{}, Runs: []RunStatus{}, CronJobs: []CronStatus{}}
	for id, a := range d.adapters {
		c := ChannelStatus{ID: string(id), Healthy: true}
		if h, ok := a.(interface{ Health() (bool, string) }); ok {
			c.Healthy, c.Detail = h.Health()
		}
		if d.runElsewhere(id) {
			c.Healthy, c.Detail = true, "standby: another replica runs it"
		}
		st.Channels = append(st.Channels, c)
	}
	slices.SortFunc(st.Channels, func(a, b ChannelStatus) int { return cmp.Compare(a.ID, b.ID) })
	for id, s := range d.runner.Statuses().All() {
		st.Runs = append(st.Runs, RunStatus{SessionID: string(id), Status: s})
	}
	slices.SortFunc(st.Runs, func(a, b RunStatus) int { return cmp.Compare(a.SessionID, b.SessionID) })
	d.reloadMu.Lock()
	st.Reloaded, st.ReloadError = d.reloadedAt, d.reloadErr
	d.reloadMu.Unlock()
	var err error
	if st.Outbox, err = d.store.Backlog(ctx); err != nil {
		return st, err
	}
	if d.cron != nil {
		jobs, err := d.cron.Store().List(ctx)
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

// withStatus serves GET /v1/status and the dashboard at /admin beside h.
func (d *Daemon) withStatus(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	d.statusRoute(mux)
	// The dashboard's pages are parsed on its first request, not at start.
	dash := lazyHandler(d.adminHandler)
	mux.Handle("/admin", dash)
	mux.Handle("/admin/", dash)
	mux.Handle("/", h)
	return mux
}

// statusRoute serves /mcp beside the API, to a request with an admin
// token.
func (d *Daemon) statusRoute(mux *http.ServeMux) {
	tokens := make([]string, len(d.cfg().HTTP.Tokens))
	for i, t := range d.cfg().HTTP.Tokens {
		tokens[i] = t.Reveal()
	}
	d.mcpRoute(mux, httpserve.AdminCheck(tokens))
}

// apiOperator answers the API's daemon routes: status, replicas, spend
// and people's tokens.
type apiOperator struct{ d *Daemon }

var _ api.Operator = apiOperator{}

func (o apiOperator) Status(ctx context.Context) (any, error) { return o.d.Snapshot(ctx) }

func (o apiOperator) Replicas(ctx context.Context) (any, error) {
	list, err := o.d.Replicas(ctx)
	if list == nil {
		list = []cluster.Replica{}
	}
	return map[string]any{"replicas": list}, err
}

func (o apiOperator) Budget(ctx context.Context, s sessions.Session) (any, error) {
	return o.d.budget.Budget(ctx, s.Key, s.ID)
}

func (o apiOperator) Connect(ctx context.Context, u vault.User, provider, token string) error {
	return o.d.vault.Connect(ctx, u, provider, token)
}

func (o apiOperator) Disconnect(ctx context.Context, u vault.User, provider string) (bool, error) {
	return o.d.vault.Disconnect(ctx, u, provider)
}

// writeRunFile records the daemon's address; the file is removed at Stop.
func (d *Daemon) writeRunFile() {
	path := runfile.Path(d.cfg())
	if path == "" {
		return
	}
	if err := runfile.Write(path, runfile.Running{PID: os.Getpid(), Listen: d.listen, Version: d.version, Started: d.started}); err != nil {
		d.log.Debug("record the daemon's address", "path", path, "error", err)
		return
	}
	d.runFile = path
}

// removeRunFile removes the run file this daemon wrote, unless another
// daemon (a replica on the same host) has written it since.
func (d *Daemon) removeRunFile() {
	if d.runFile != "" {
		runfile.Remove(d.runFile, runfile.Running{PID: os.Getpid(), Listen: d.listen})
		d.runFile = ""
	}
}

// lazyHandler is the handler build returns, built on the first request:
// a route most daemons never serve costs nothing at start.
func lazyHandler(build func() http.Handler) http.Handler {
	h := sync.OnceValue(build)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h().ServeHTTP(w, r) })
}
