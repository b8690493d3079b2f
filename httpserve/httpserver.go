package httpserve

import (
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/webchat"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/webhooks"
)

// Every HTTP server parley runs bounds what a slow or idle client holds: a
// request's headers must arrive within readHeaderTimeout and the whole
// request (its body too) within readTimeout; an idle keep-alive
// connection is closed after idleTimeout. No write timeout: an event
// stream and a sync webhook answer for as long as they need. Webhooks
// bound their bodies more tightly (webhooks.DefaultBodyTimeout).
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 60 * time.Second
	idleTimeout       = 120 * time.Second
)

// NewServer is an http.Server for h with parley's timeouts.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
	}
}

func Handler(db *dbutil.DB, channels map[adapters.ID]adapters.Adapter, v1 http.Handler, ready ...ReadyOptions) http.Handler {
	mux := http.NewServeMux()
	Health(mux, db, channels, ready...)
	AppRoutes(mux, channels, v1)
	return SecurityHeaders(mux)
}

// AppRoutes serves the API, the web chat and the webhooks.
func AppRoutes(mux *http.ServeMux, channels map[adapters.ID]adapters.Adapter, v1 http.Handler) {
	MountWebhooks(mux, channels)
	if v1 != nil {
		mux.Handle("/v1/", v1)
		mux.Handle("GET /{$}", webchat.Handler())
	}
	if h, ok := channels[webhooks.AdapterID].(http.Handler); ok {
		// Every method: the hooks answer a wrong one as an unknown hook.
		mux.Handle(webhooks.Pattern, h)
	}
}

func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers with an error, as {"error": {"code", "message"}}.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	WriteJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// MountWebhooks serves the channels that take webhooks on parley's HTTP
// server.
func MountWebhooks(mux *http.ServeMux, channels map[adapters.ID]adapters.Adapter) {
	for _, a := range channels {
		if wh := adapters.CapabilitiesOf(a).Webhook; wh != nil {
			if p, h := wh.Webhook(); p != "" {
				mux.Handle(p, h)
			}
		}
	}
}

// Lazy is the handler build returns, built on the first request: a route
// most daemons never serve costs nothing at start.
func Lazy(build func() http.Handler) http.Handler {
	h := sync.OnceValue(build)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h().ServeHTTP(w, r) })
}

// LocalURL is the http:// address a person on this host opens to reach a
// listener at addr: one bound to every interface (":8080", 0.0.0.0, ::)
// is reached at localhost.
func LocalURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
