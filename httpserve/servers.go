package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/telemetry"
)

// Routes are what parley serves over HTTP.
type Routes struct {
	DB *dbutil.DB
	// Channels are served their webhooks, and /readyz shows their health.
	Channels map[adapters.ID]adapters.Adapter
	// V1 is the API; the web chat is served with it. Nil: neither.
	V1    http.Handler
	Ready ReadyOptions
	// Metrics is served at GET /metrics, open like /healthz.
	Metrics http.Handler
	// MCP is served at /mcp; nil: not served.
	MCP http.Handler
	// Admin builds the dashboard at /admin, on its first request.
	Admin func() http.Handler
	// Tracer starts a span for each API request and webhook; nil: off.
	Tracer *telemetry.Tracer
	// Log is the access log's.
	Log *slog.Logger
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (ClientAddr).
	TrustedProxies []netip.Prefix
}

// AppHandler serves every route of r: the app server's handler when no
// ops server takes the health and metrics routes, before its access log
// and spans.
func AppHandler(r Routes) http.Handler {
	return r.withMetrics(r.withStatus(Handler(r.DB, r.Channels, r.V1, r.Ready)))
}

// withMetrics adds /metrics to h.
func (r Routes) withMetrics(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", r.Metrics)
	mux.Handle("/", h)
	return SecurityHeaders(mux)
}

// withStatus serves /mcp and the dashboard at /admin beside h.
func (r Routes) withStatus(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	if r.MCP != nil {
		mux.Handle("/mcp", r.MCP)
	}
	// The dashboard's pages are parsed on its first request, not at start.
	dash := Lazy(r.Admin)
	mux.Handle("/admin", dash)
	mux.Handle("/admin/", dash)
	mux.Handle("/", h)
	return mux
}

// Servers are parley's HTTP servers: the app's, and the ops server when
// http.ops_listen moves the health and metrics routes to one of their own.
type Servers struct {
	ln, opsLn net.Listener
	app, ops  *http.Server
	failed    chan error    // the app server's end, for Failed
	done      chan struct{} // closed when the app server has returned
	err       error         // what it returned, once done is closed
}

// Listen opens the app server's listener on addr and, unless opsAddr is
// "", the ops server's, so that a port in use fails the start at once.
func Listen(addr, opsAddr string) (*Servers, error) {
	s := &Servers{}
	var err error
	if s.ln, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w; set http.listen in the config to a free address", addr, err)
	}
	if opsAddr != "" {
		if s.opsLn, err = net.Listen("tcp", opsAddr); err != nil {
			s.ln.Close()
			return nil, fmt.Errorf("listen on %s: %w; set http.ops_listen in the config to a free address", opsAddr, err)
		}
	}
	return s, nil
}

// Listener is the app server's listener; nil for nil s.
func (s *Servers) Listener() net.Listener {
	if s == nil {
		return nil
	}
	return s.ln
}

// Serve serves r: on the app's listener, or with an ops listener the
// health and metrics routes there and the rest on the app's.
func (s *Servers) Serve(r Routes) {
	if s.opsLn != nil {
		app := http.NewServeMux()
		AppRoutes(app, r.Channels, r.V1)
		s.app = NewServer(SecurityHeaders(r.withStatus(app)))
		health := http.NewServeMux()
		Health(health, r.DB, r.Channels, r.Ready)
		s.ops = NewServer(AccessLog(r.Log, r.withMetrics(health)))
		go func() { _ = s.ops.Serve(s.opsLn) }()
	} else {
		s.app = NewServer(AppHandler(r))
	}
	// A span for each API request and webhook, under the caller's
	// traceparent; the turns they start hang under it, and the request's
	// access log line carries its trace_id.
	// Outermost, so the spans, the access log and every handler see the
	// client behind a trusted proxy.
	s.app.Handler = ClientAddr(r.Tracer.Serve(AccessLog(r.Log, s.app.Handler), "/v1/", "/hooks/"), r.TrustedProxies)
	s.failed, s.done = make(chan error, 1), make(chan struct{})
	go func() {
		s.err = s.app.Serve(s.ln)
		s.failed <- s.err
		close(s.done)
	}()
}

// Failed receives the app server's failure; nil (never) for nil s.
func (s *Servers) Failed() <-chan error {
	if s == nil {
		return nil
	}
	return s.failed
}

// Shutdown stops the app server taking requests and gives those in flight
// grace to end; it returns the server's failure, if it had one.
func (s *Servers) Shutdown(ctx context.Context, grace time.Duration) error {
	if s == nil || s.app == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := s.app.Shutdown(ctx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	<-s.done
	if s.err != nil && !errors.Is(s.err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", s.err)
	}
	return nil
}

// Close closes what Shutdown leaves open: the ops server, and the
// listeners of servers that never served (a start that failed).
func (s *Servers) Close() {
	if s == nil {
		return
	}
	if s.app == nil {
		s.ln.Close()
	}
	if s.ops != nil {
		s.ops.Close()
	} else if s.opsLn != nil {
		s.opsLn.Close()
	}
}
