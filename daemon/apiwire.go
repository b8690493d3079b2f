package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/commands"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/turns"
)

// apiAdapterID is the channel of messages sent through the HTTP API.
const apiAdapterID = "api"

// apiChannel is the "api" channel: messages sent through the HTTP API enter
// the gateway like any channel's, and their replies need no sending (the
// client reads them from the session and its event stream).
type apiChannel struct{}

func (apiChannel) Start(ctx context.Context, _ adapters.Sink) error { <-ctx.Done(); return nil }

// Source declares the API as a source: its caller follows the run and
// reads the reply (nothing is queued), and answers permission questions
// through the API.
func (apiChannel) Source() adapters.Source {
	return adapters.Source{Name: "api", Replies: adapters.RepliesToCaller, Asks: adapters.AskCaller}
}

func (apiChannel) Send(_ context.Context, out adapters.Outbound) (adapters.Sent, error) {
	return adapters.Sent{MessageID: out.IdempotencyKey}, nil
}

// commandRefusal is the API's answer to a chat command sent as a message:
// its answer would go to the chat, which over the API is nowhere, so it
// names the route that does the command's work (for /help, every route).
func commandRefusal(c commands.Command) error {
	route := c.Route
	if route == "" {
		route = "each command has a route: " + commands.Routes()
	}
	return fmt.Errorf("%w: /%s is a chat command; over the API, %s", api.ErrInvalid, c.Name, route)
}

// apiRunner drives runs for the API through the gateway and the agent.
type apiRunner struct{ d *Daemon }

var _ api.Runner = apiRunner{}

func (r apiRunner) Send(ctx context.Context, req api.SendRequest) (string, error) {
	s, err := r.d.sessions.Session(ctx, req.SessionID)
	if err != nil {
		return "", err
	}
	if c, ok := commands.Parse(req.Content); ok {
		return "", commandRefusal(c)
	}
	if req.IfIdle && r.d.gw.Busy(s.Key) {
		return "", fmt.Errorf("session %s: %w", s.ID, api.ErrBusy)
	}
	id := uuid.Must(uuid.NewV7()).String()
	// A session without a user is keyed like a group's; its sender is "api".
	// What the client sends is what is stored: no sender's name before it.
	user := s.Key.UserID
	if user == "" {
		user = "api"
	}
	in := adapters.Inbound{Adapter: apiAdapterID, Surface: s.Key.Surface, ChatID: s.Key.SurfaceID, UserID: user,
		Group: s.Key.UserID == "", AgentID: s.Key.AgentID, MessageID: id, Text: req.Content, Files: req.Files, Model: req.Model, ReasoningEffort: req.ReasoningEffort,
		Time: time.Now(), Unattributed: true}
	if err := r.d.gw.Submit(ctx, in); err != nil {
		switch {
		case errors.Is(err, adapters.ErrInvalidInbound):
			return "", fmt.Errorf("%w: %v", api.ErrInvalid, err)
		case errors.Is(err, gateway.ErrQueueFull):
			return "", fmt.Errorf("%w: %v", api.ErrQueueFull, err)
		}
		return "", err
	}
	return id, nil
}

func (r apiRunner) Status(id sessions.ID) api.Status { return r.d.runner.Status(id) }

func (r apiRunner) Abort(id sessions.ID) bool {
	s, err := r.d.sessions.Session(context.Background(), id)
	if err != nil {
		return false
	}
	return r.d.gw.Abort(s.Key)
}

func (r apiRunner) Reset(ctx context.Context, key sessions.Key) (sessions.Session, error) {
	if !r.d.gw.Abort(key) {
		r.d.abortOnHolder(ctx, key)
	}
	return r.d.sessions.Reset(ctx, key)
}

func (r apiRunner) Compact(ctx context.Context, id sessions.ID) (api.CompactResult, error) {
	s, err := r.d.sessions.Session(ctx, id)
	if err != nil {
		return api.CompactResult{}, err
	}
	a, ok := r.d.cfg().Agent(s.Key.AgentID)
	if !ok {
		return api.CompactResult{}, fmt.Errorf("%w: the session's agent %q is not configured", api.ErrRejected, s.Key.AgentID)
	}
	res, err := r.d.runner.Compact(ctx, s, turns.AgentConfig(a, s.Key))
	switch {
	case errors.Is(err, agent.ErrBusy):
		return api.CompactResult{}, fmt.Errorf("%w: %v", api.ErrBusy, err)
	case err != nil && res.Skipped != "":
		return api.CompactResult{}, fmt.Errorf("%w: nothing to compact: %s", api.ErrRejected, res.Skipped)
	case err != nil:
		return api.CompactResult{}, err
	}
	return api.CompactResult{Compacted: res.Compacted, Skipped: res.Skipped, SummaryID: string(res.SummaryID),
		Summarized: res.Summarized, Archived: res.Archived, TokensBefore: res.TokensBefore, TokensAfter: res.TokensAfter}, nil
}

// apiHandler is the /v1 API over this daemon.
func (d *Daemon) apiHandler() http.Handler { return d.apiHandlerFor(d.cfg()) }

// apiHandlerFor is the API's handler with cfg's tokens; its limits are the
// running config's, read at each request.
func (d *Daemon) apiHandlerFor(cfg *config.Config) http.Handler {
	tokens := make([]string, len(cfg.HTTP.Tokens))
	for i, t := range cfg.HTTP.Tokens {
		tokens[i] = t.Reveal()
	}
	return api.New(api.Options{Store: d.sessions, Authenticated: d.toHolder, Runner: apiRunner{d}, Events: d.events, Tokens: tokens,
		Memory: d.memory, Callbacks: d.callbacks, Operator: apiOperator{d}, Permissions: apiPermissions{d}, KV: d.kv, Files: d.files, ClientTools: d.clientTools, ToolTaken: d.toolTaken,
		Limits: func() api.Limits {
			h := d.cfg().HTTP
			return api.Limits{MaxTitleChars: h.MaxTitleChars, MaxMetadataBytes: h.MaxMetadataBytes}
		},
		DefaultAgent: cfg.Agents[0].ID, KnownAgent: func(id string) bool { _, ok := d.cfg().Agent(id); return ok }, Log: d.named("api")})
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
