// Package admin is parley's dashboard at /admin: server-rendered pages,
// behind an admin token, for what an operator looks at and acts on:
// usage charts (turns, time to answer, tokens, cost, errors and fallbacks,
// the outbox backlog), sessions and their messages, runs (abort), cron
// jobs (run now, enable, disable), webhook deliveries and refusals, people
// and pairing requests (approve, deny, revoke, block), agents, providers,
// the outbox (retry a failed send), the replicas and the channels'
// health. No script, no external assets: the pages are html/template and
// one stylesheet, embedded; the charts are SVG drawn on the server; every
// table sorts and pages through plain links.
package admin

import (
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/internal/throttle"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/metrics"
	"github.com/parleyd/parley/sessions"
	live "github.com/parleyd/parley/status"
	"github.com/parleyd/parley/webhooks"
)

//go:embed pages/*.html pages/style.css
var files embed.FS

// Overview is the daemon's state on the dashboard's first page.
type Overview struct {
	Version, Replica, Engine, Listen string
	Started                          time.Time
	Channels                         []Channel
	Lanes, Queued, Runs              int
	Outbox                           gateway.Backlog
	Reloaded                         time.Time
	ReloadError                      string
	MCP                              []MCPServer
}

// OverviewOf is the first page's state: the daemon's status and its MCP
// servers'.
func OverviewOf(st live.Status, mcp []mcptools.Status) Overview {
	o := Overview{Version: st.Version, Replica: st.Replica, Engine: st.Engine, Listen: st.Listen, Started: st.Started,
		Lanes: st.Lanes, Queued: st.Queued, Runs: len(st.Runs), Outbox: st.Outbox, Reloaded: st.Reloaded, ReloadError: st.ReloadError}
	for _, c := range st.Channels {
		o.Channels = append(o.Channels, Channel{ID: c.ID, Healthy: c.Healthy, Detail: c.Detail})
	}
	for _, m := range mcp {
		o.MCP = append(o.MCP, MCPServer{ID: m.ID, State: m.State, Error: m.Error, Tools: m.Tools})
	}
	return o
}

// MCPServer is an MCP server and its state.
type MCPServer struct {
	ID, State, Error string
	Tools            []string
}

// Channel is a channel and its health.
type Channel struct {
	ID      string
	Healthy bool
	Detail  string
}

// Refusal is a webhook request refused before it became a delivery.
type Refusal = webhooks.Refusal

// Options are what the dashboard shows and acts on.
type Options struct {
	Tokens   []string // the admin tokens (http.tokens)
	DB       *dbutil.DB
	Sessions *sessions.SQLStore
	Outbox   *gateway.Store
	Cron     *cron.Store // nil: no cron
	Hooks    func() []config.Hook
	Refused  func() []Refusal // recent refused webhook requests; nil: none kept
	Overview func(ctx context.Context) (Overview, error)
	Runs     func() map[sessions.ID]agent.Status
	Abort    func(sessions.ID) bool
	Wake     func() // after a retry: the sender looks at once
	// Config is the running config (agents, providers, channels, prices);
	// nil hides the agents and providers pages.
	Config func() *config.Config
	// Models is what parley saw of each model since it started; nil: none.
	Models func() []metrics.ModelStats
	// Fallbacks are when fallback models answered; nil: not counted.
	Fallbacks func() []time.Time
	// Replicas are the live replicas sharing the database; nil: parley
	// runs alone.
	Replicas func(ctx context.Context) ([]cluster.Replica, error)
	Log      *slog.Logger
	Now      func() time.Time // nil: time.Now
}

// cookieName holds the dashboard's login: a random id naming a row of
// admin_sessions.
const cookieName = "parley_admin"

type server struct {
	o     Options
	sums  [][sha256.Size]byte
	pages map[string]*template.Template
	// guesses counts wrong login tokens per address.
	guesses *throttle.Failures
}

// Handler serves the dashboard under /admin.
func Handler(o Options) (http.Handler, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &server{o: o, pages: map[string]*template.Template{}, guesses: throttle.New(loginGuesses, loginGuessWindow)}
	for _, t := range o.Tokens {
		if t = strings.TrimSpace(t); t != "" {
			s.sums = append(s.sums, sha256.Sum256([]byte(t)))
		}
	}
	funcs := template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.Local().Format("2006-01-02 15:04:05")
		},
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return time.Since(t).Round(time.Second).String()
		},
		"cut": func(n int, s string) string {
			if r := []rune(s); len(r) > n {
				return string(r[:n]) + "…"
			}
			return s
		},
		"query": func(k, v string) string { return url.QueryEscape(k) + "=" + url.QueryEscape(v) },
		"files": filesOf,
	}
	for _, name := range []string{"login", "overview", "sessions", "session", "runs", "cron", "hooks", "pairing", "outbox",
		"usage", "people", "agents", "providers", "replicas"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "pages/layout.html", "pages/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("admin page %s: %w", name, err)
		}
		s.pages[name] = t
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/style.css", func(w http.ResponseWriter, r *http.Request) {
		b, _ := files.ReadFile("pages/style.css")
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("POST /admin/login", s.login)
	mux.HandleFunc("POST /admin/logout", s.logout)
	for path, h := range map[string]func(http.ResponseWriter, *http.Request) error{
		"GET /admin":                            s.overview,
		"GET /admin/{$}":                        s.overview,
		"GET /admin/sessions":                   s.sessionList,
		"GET /admin/sessions/{id}":              s.session,
		"GET /admin/runs":                       s.runs,
		"POST /admin/runs/{id}/abort":           s.abort,
		"GET /admin/cron":                       s.cron,
		"POST /admin/cron/{id}/{action}":        s.cronAction,
		"GET /admin/hooks":                      s.hooks,
		"GET /admin/pairing":                    s.pairing,
		"POST /admin/pairing/{code}/{decision}": s.pairingAction,
		"GET /admin/outbox":                     s.outbox,
		"POST /admin/outbox/{id}/retry":         s.retry,
		"GET /admin/usage":                      s.usage,
		"GET /admin/people":                     s.people,
		"POST /admin/people/{action}":           s.personAction,
		"GET /admin/agents":                     s.agents,
		"GET /admin/providers":                  s.providers,
		"GET /admin/replicas":                   s.replicas,
	} {
		mux.HandleFunc(path, s.guard(h))
	}
	return secure(mux), nil
}

// secure sets the headers every page has: a policy allowing only this
// origin's stylesheet, no script, no framing.
func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// authorized says whether the request carries a live login cookie or an
// admin bearer token.
func (s *server) authorized(r *http.Request) bool {
	if c, err := r.Cookie(cookieName); err == nil {
		return s.loggedIn(r.Context(), c.Value)
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		_, ok := s.tokenSum(tok)
		return ok
	}
	return false
}

// crossSite refuses a form posted from another site (the cookie is
// SameSite=Strict too): net/http's check, which trusts the browser's
// Sec-Fetch-Site and, without it, compares Origin with Host.
var crossSite = http.NewCrossOriginProtection()

// refuseCrossSite answers a form posted from another site, and says
// what to do when the site is in fact the dashboard's own, behind a proxy
// that changes the Host header; it reports whether it answered.
func refuseCrossSite(w http.ResponseWriter, r *http.Request) bool {
	if err := crossSite.Check(r); err != nil {
		http.Error(w, "refused: this form was posted from another site ("+err.Error()+"). If you opened the dashboard "+
			"through a reverse proxy, have it pass the browser's Host header on unchanged, or use a browser that sends Sec-Fetch-Site.",
			http.StatusForbidden)
		return true
	}
	return false
}

// guard shows the login page to a request without the login, refuses a
// cross-site post, and renders a handler's error in the page.
func (s *server) guard(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			if len(s.sums) == 0 {
				http.Error(w, "the dashboard needs an admin token: set http.tokens in parley's config", http.StatusForbidden)
				return
			}
			w.WriteHeader(http.StatusUnauthorized)
			s.render(w, r, "login", map[string]any{"Next": r.URL.Path})
			return
		}
		if refuseCrossSite(w, r) {
			return
		}
		// Text no engine stores alike (PostgreSQL refuses it) is refused
		// here, so both engines answer it the same.
		if !plainText(r.URL.Path) {
			http.Error(w, "the address holds bytes that are not UTF-8 text", http.StatusBadRequest)
			return
		}
		for _, vs := range r.URL.Query() {
			for _, v := range vs {
				if !plainText(v) {
					http.Error(w, "a query parameter is not UTF-8 text without NUL bytes", http.StatusBadRequest)
					return
				}
			}
		}
		if err := h(w, r); err != nil {
			s.o.Log.WarnContext(r.Context(), "admin page", "path", r.URL.Path, "error", err)
			status := http.StatusInternalServerError
			switch {
			case errors.Is(err, errNotFound):
				status = http.StatusNotFound
			case errors.Is(err, sessions.ErrBadCursor):
				status, err = http.StatusBadRequest, errors.New("that page link is damaged or from another list; start again from the first page")
			}
			w.WriteHeader(status)
			s.render(w, r, "overview", map[string]any{"Error": err.Error()})
		}
	}
}

var errNotFound = errors.New("not found")

// plainText says whether s is UTF-8 without a NUL byte.
func plainText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// render writes a page; data's "Flash" is the outcome of the last action.
func (s *server) render(w http.ResponseWriter, r *http.Request, page string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Page"] = page
	if f := takeFlash(w, r); f != "" {
		data["Flash"] = f
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages[page].Execute(w, data); err != nil {
		s.o.Log.Warn("render an admin page", "page", page, "error", err)
	}
}
