package daemon

import (
	"context"
	"net/http"

	"github.com/parleyd/parley/admin"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/webhooks"
)

// adminHandler is the dashboard at /admin, on the daemon's parts.
func (d *Daemon) adminHandler() http.Handler {
	tokens := make([]string, len(d.cfg().HTTP.Tokens))
	for i, t := range d.cfg().HTTP.Tokens {
		tokens[i] = t.Reveal()
	}
	o := admin.Options{
		Tokens: tokens, DB: d.db, Sessions: d.sessions, Outbox: d.store, Log: d.named("admin"),
		Hooks:    func() []config.Hook { return d.cfg().Hooks },
		Runs:     d.runner.Statuses().All,
		Abort:    func(id sessions.ID) bool { return d.bridge.APIRunner().Abort(id) },
		Wake:     d.sender.Wake,
		Overview: d.overview,
	}
	if d.cron != nil {
		o.Cron = d.cron.Store()
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

// overview is the dashboard's first page, from the daemon's status.
func (d *Daemon) overview(ctx context.Context) (admin.Overview, error) {
	st, err := d.Snapshot(ctx)
	if err != nil {
		return admin.Overview{}, err
	}
	o := admin.Overview{Version: st.Version, Replica: st.Replica, Engine: st.Engine, Listen: st.Listen, Started: st.Started,
		Lanes: st.Lanes, Queued: st.Queued, Runs: len(st.Runs), Outbox: st.Outbox, Reloaded: st.Reloaded, ReloadError: st.ReloadError}
	for _, c := range st.Channels {
		o.Channels = append(o.Channels, admin.Channel{ID: c.ID, Healthy: c.Healthy, Detail: c.Detail})
	}
	for _, m := range d.mcp.Statuses() {
		o.MCP = append(o.MCP, admin.MCPServer{ID: m.ID, State: m.State, Error: m.Error, Tools: m.Tools})
	}
	return o, nil
}
