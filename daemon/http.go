package daemon

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/admin"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/mcpserve"
	"github.com/parleyd/parley/metrics"
	"github.com/parleyd/parley/secret"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/status"
	"github.com/parleyd/parley/vault"
	"github.com/parleyd/parley/webhooks"
)

// Status is a running daemon's live state, for `parley status` and
// GET /v1/status.
type Status = status.Status

// Snapshot is the daemon's live state now.
func (d *Daemon) Snapshot(ctx context.Context) (Status, error) {
	return status.Snapshot(ctx, d.statusSources())
}

// statusSources are the parts status reads.
func (d *Daemon) statusSources() status.Sources {
	src := status.Sources{Channels: d.adapters, Elsewhere: d.runElsewhere, Gateway: d.gw, Outbox: d.store, Runs: d.runner.Statuses().All,
		Status: Status{Version: d.version, Replica: d.replicas.ID(d.cfg().Gateway.ReplicaID), Engine: string(d.db.Dialect)}}
	if d.cron != nil {
		src.Cron = d.cron.Store()
	}
	d.liveMu.Lock()
	src.Status.Started, src.Status.Listen = d.started, d.listen
	src.Reloaded, src.ReloadError = d.reloadedAt, d.reloadErr
	d.liveMu.Unlock()
	return src
}

// APIHandler is the /v1 API over this daemon, with the tokens of the
// config it was built from, for a front door in this process that speaks
// to parley as an API client does (`parley acp` reaches it through
// acpserve.InMemory, never a port).
func (d *Daemon) APIHandler() http.Handler { return d.apiHandlerFor(d.cfg()) }

// apiHandlerFor is the API's handler with cfg's tokens; its limits and
// agents are the running config's, read at each request.
func (d *Daemon) apiHandlerFor(cfg *config.Config) http.Handler {
	return api.New(api.Options{Store: d.sessions, Authenticated: d.replicas.ToHolder, Runner: d.bridge.APIRunner(), Events: d.events, Tokens: secret.Reveal(cfg.HTTP.Tokens),
		Memory: d.memory, Callbacks: d.callbacks, Operator: apiOperator{d}, Permissions: d.bridge.APIPermissions(), KV: d.kv, Files: d.files, SQL: d.sql, Harnesses: d.harnesses, SessionHooks: d.sessionHooks, ClientTools: d.clientTools, ToolTaken: d.toolTaken,
		DefaultAgent: cfg.Agents[0].ID, Config: d.cfg, Log: d.named("api")})
}

// lazyAPI is the API's handler, built on its first request (registering
// its routes is start-up time that readiness doesn't need) with the tokens
// the daemon started with, as it would have been at start.
func (d *Daemon) lazyAPI() http.Handler {
	cfg := d.cfg()
	return httpserve.Lazy(func() http.Handler { return d.apiHandlerFor(cfg) })
}

// routes are what the daemon serves over HTTP around the API v1, its
// gauges set for /metrics.
func (d *Daemon) routes(v1 http.Handler) httpserve.Routes {
	d.metrics.SetQueue(d.gw.QueueDepth)
	d.metrics.SetActiveLanes(d.gw.ActiveLanes)
	d.metrics.SetHistoryCache(d.sessions.HistoryCacheStats)
	d.metrics.SetCheckpoints(d.db.CheckpointStats)
	d.metrics.SetState(func(ctx context.Context) (metrics.State, error) {
		return status.Gauges(ctx, d.statusSources(), d.replicas, d.db, func(ctx context.Context) ([]metrics.AgentSpend, error) {
			return d.budget.AgentsToday(ctx, d.cfg().AgentIDs())
		})
	})
	d.metrics.SetPrice(func(spec string, in, out int64) (float64, bool) { return d.cfg().Budgets.Cost(spec, in, out) }) // reloadable
	// /mcp answers a request with an admin token.
	mcp := mcpserve.Handler(d.MCPServer, func() bool { return d.cfg().HTTP.MCP }, httpserve.AdminCheck(secret.Reveal(d.cfg().HTTP.Tokens)))
	proxies, _ := d.cfg().HTTP.TrustedProxyPrefixes() // config.Check refused a bad one
	return httpserve.Routes{DB: d.db, Channels: d.adapters, V1: v1, Ready: d.readyOptions(), Metrics: d.metrics.Handler(), MCP: mcp,
		Admin: d.adminHandler, Tracer: d.tracer, Log: d.named("http"), TrustedProxies: proxies}
}

// MCPServer is parley as an MCP server over this daemon: send_message
// goes through the gateway on the channel "mcp", like any channel's
// message, and the sessions tools read the sessions store. `parley mcp
// serve` serves it over stdio; /mcp over streamable HTTP.
func (d *Daemon) MCPServer() *mcp.Server {
	return mcpserve.New(mcpserve.Options{Version: d.version, Submit: d.gw.Submit, Bus: d.bus, Sessions: d.sessions,
		Agents: func() []string { return d.cfg().AgentIDs() },
		Record: func(ctx context.Context, in adapters.Inbound) (gateway.InboundRecord, error) {
			return d.store.InboundOf(ctx, in.Adapter, in.ChatID, in.MessageID)
		},
		Log: d.named("mcp_server")})
}

// adminHandler is the dashboard at /admin, on the daemon's parts.
func (d *Daemon) adminHandler() http.Handler {
	o := admin.Options{
		Tokens: secret.Reveal(d.cfg().HTTP.Tokens), DB: d.db, Sessions: d.sessions, Outbox: d.store, Log: d.named("admin"),
		Hooks: func() []config.Hook { return d.cfg().Hooks },
		Runs:  d.runner.Statuses().All,
		Abort: func(id sessions.ID) bool { return d.bridge.APIRunner().Abort(id) },
		Wake:  d.sender.Wake,
		Overview: func(ctx context.Context) (admin.Overview, error) {
			st, err := d.Snapshot(ctx)
			if err != nil {
				return admin.Overview{}, err
			}
			return admin.OverviewOf(st, d.mcp.Statuses()), nil
		},
	}
	if d.cron != nil {
		o.Cron = d.cron.Store()
	}
	o.Config, o.Models, o.Fallbacks = d.cfg, d.metrics.ModelStats, d.metrics.Fallbacks
	if d.replicas != nil {
		o.Replicas = d.Replicas
	}
	if h, ok := d.adapters[webhooks.AdapterID].(*webhooks.Server); ok {
		o.Refused = h.Refusals
	}
	h, err := admin.Handler(o)
	if err != nil {
		// The pages are embedded and parsed by the tests: this is a bug.
		d.log.Error("the admin dashboard can't start", "error", err)
		return http.NotFoundHandler()
	}
	return h
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
