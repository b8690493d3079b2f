// Package webchat is the web chat page: one small page, embedded in the
// binary, that talks to an agent through the HTTP API (a session of its
// own, replies streamed over server-sent events). It has no dependencies
// and keeps the API token the user types in the browser's storage.
package webchat

import (
	_ "embed"
	"net/http"
)

//go:embed index.html
var page []byte

// Handler serves the page at GET /.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		_, _ = w.Write(page)
	})
}
