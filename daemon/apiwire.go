package daemon

import (
	"context"
	"net/http"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/httpserve"
)

// apiHandler is the /v1 API over this daemon.
func (d *Daemon) apiHandler() http.Handler { return d.apiHandlerFor(d.cfg()) }

// apiHandlerFor is the API's handler with cfg's tokens; its limits are the
// running config's, read at each request.
func (d *Daemon) apiHandlerFor(cfg *config.Config) http.Handler {
	tokens := make([]string, len(cfg.HTTP.Tokens))
	for i, t := range cfg.HTTP.Tokens {
		tokens[i] = t.Reveal()
	}
	return api.New(api.Options{Store: d.sessions, Authenticated: d.toHolder, Runner: d.bridge.APIRunner(), Events: d.events, Tokens: tokens,
		Memory: d.memory, Callbacks: d.callbacks, Operator: apiOperator{d}, Permissions: d.bridge.APIPermissions(), KV: d.kv, Files: d.files, ClientTools: d.clientTools, ToolTaken: d.toolTaken,
		Limits: func() api.Limits {
			h := d.cfg().HTTP
			return api.Limits{MaxTitleChars: h.MaxTitleChars, MaxMetadataBytes: h.MaxMetadataBytes}
		},
		DefaultAgent: cfg.Agents[0].ID, KnownAgent: func(id string) bool { _, ok := d.cfg().Agent(id); return ok },
		AgentModels: func(id string) ([]string, string) {
			a, ok := d.cfg().Agent(id)
			if !ok {
				return nil, ""
			}
			return a.AllowedModels(), a.ReasoningEffort
		}, Log: d.named("api")})
}

// lazyAPI is the API's handler, built on its first request (registering
// its routes is start-up time that readiness doesn't need) with the tokens
// the daemon started with, as it would have been at start.
func (d *Daemon) lazyAPI() http.Handler {
	cfg := d.cfg()
	return lazyHandler(func() http.Handler { return d.apiHandlerFor(cfg) })
}

// metricsHandler adds /metrics (Prometheus, open like /healthz) and the
// daemon's gauges to h.
func (d *Daemon) metricsHandler(h http.Handler) http.Handler {
	d.metrics.SetQueue(d.gw.QueueDepth)
	d.metrics.SetActiveLanes(d.gw.ActiveLanes)
	d.metrics.SetHistoryCache(d.sessions.HistoryCacheStats)
	d.metrics.SetCheckpoints(d.db.CheckpointStats)
	d.metrics.SetState(d.metricsState)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.metrics.Handler())
	mux.Handle("/", h)
	return httpserve.SecurityHeaders(mux)
}

// watchChannels samples each channel's health every few seconds and counts
// its turns for the metrics: healthy to unhealthy is an error, back again a
// reconnect. Channels that can't say how they are are not counted here;
// their failed sends are, by the sender.
func (d *Daemon) watchChannels(ctx context.Context, every time.Duration) {
	healthy := map[adapters.ID]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for id, a := range d.adapters {
			h, ok := a.(interface{ Health() (bool, string) })
			if !ok {
				continue
			}
			if d.runElsewhere(id) {
				delete(healthy, id) // handed over, or standing by: no error
				continue
			}
			now, _ := h.Health()
			was, seen := healthy[id]
			switch {
			case seen && was && !now:
				d.metrics.AdapterError(string(id))
			case seen && !was && now:
				d.metrics.Reconnect(string(id))
			}
			healthy[id] = now
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
