package main

import (
	"net/http"
	"time"
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

// newHTTPServer is an http.Server for h with parley's timeouts.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
	}
}
