package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/webchat"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/webhooks"
)

// trimAfter is when, after start, the pages only start-up used are handed
// back (trimResident).
const trimAfter = 300 * time.Millisecond

// shutdownGrace is how long in-flight HTTP requests get after a signal.
const shutdownGrace = 10 * time.Second

func cmdRun(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := configFlag(fs)
	if _, err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	cfg, used, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.Log)

	d, err := startDaemon(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer d.close()
	channels, err := buildAdapters(cfg, log, d.db)
	if err != nil {
		return err
	}
	channels[adapters.ID("cron")] = d.cron
	channels[adapters.ID(apiAdapterID)] = apiChannel{}
	if len(cfg.Hooks) > 0 {
		channels[webhooks.AdapterID] = webhooks.New(webhooks.Options{Hooks: cfg.Hooks, DB: d.db, Notify: d.notify, Log: log,
			OnDelivery: d.metrics.WebhookDelivery, OnRefused: d.metrics.WebhookRefused})
	}
	d.adapters = channels

	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w; set http.listen in the config to a free address", cfg.HTTP.Listen, err)
	}
	srv := &http.Server{
		Handler:           d.metricsHandler(newHTTPHandler(d.db, d.adapters, d.apiHandler(), d.readyOptions())),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if cfg.HTTP.OpsListen != "" {
		// Health and metrics on their own address, the rest on http.listen.
		app := http.NewServeMux()
		appRoutes(app, d.adapters, d.apiHandler())
		srv.Handler = securityHeaders(app)
		opsLn, err := net.Listen("tcp", cfg.HTTP.OpsListen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w; set http.ops_listen in the config to a free address", cfg.HTTP.OpsListen, err)
		}
		health := http.NewServeMux()
		healthRoutes(health, d.db, d.adapters, d.readyOptions())
		ops := &http.Server{Handler: accessLog(log, d.metricsHandler(health)), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = ops.Serve(opsLn) }()
		defer ops.Close()
	}
	srv.Handler = accessLog(log, srv.Handler)
	log.InfoContext(ctx, "parley started", "version", version(), "config", displayPath(used),
		"database", cfg.Database.URL, "engine", d.db.Dialect, "migrations_applied", d.applied,
		"listen", ln.Addr().String(), "agents", len(cfg.Agents))

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	runErr := make(chan error, 1)
	go func() { runErr <- d.run(ctx) }()
	// Once start-up is over, hand back the pages only it used.
	go func() {
		select {
		case <-time.After(trimAfter):
			trimResident()
		case <-ctx.Done():
		}
	}()
	select {
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("parley stopping")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	if err := <-runErr; err != nil {
		return err
	}
	log.Info("parley stopped")
	return nil
}

func newHTTPHandler(db *dbutil.DB, channels map[adapters.ID]adapters.Adapter, v1 http.Handler, ready ...readyOptions) http.Handler {
	mux := http.NewServeMux()
	healthRoutes(mux, db, channels, ready...)
	appRoutes(mux, channels, v1)
	return securityHeaders(mux)
}

// appRoutes serves the API, the web chat and the webhooks.
func appRoutes(mux *http.ServeMux, channels map[adapters.ID]adapters.Adapter, v1 http.Handler) {
	mountWebhooks(mux, channels)
	if v1 != nil {
		mux.Handle("/v1/", v1)
		mux.Handle("GET /{$}", webchat.Handler())
	}
	if h, ok := channels[webhooks.AdapterID].(http.Handler); ok {
		mux.Handle("POST /hooks/{id}", h)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
