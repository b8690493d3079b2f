package httpserve

import "net/http"

// SecurityHeaders sets, on every response, the headers that stop a browser
// from sniffing a response into another type or framing one. The web chat
// page sets its own, stricter, Content-Security-Policy over this one.
func SecurityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		h.ServeHTTP(w, r)
	})
}
