package mcpserve

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/httpserve"
)

// Handler is /mcp: the server build makes, over streamable HTTP, to
// requests admin lets through (an admin token), while on says the server
// is on (http.mcp, read at each request, so a reload turns it on or off).
func Handler(build func() *mcp.Server, on func() bool, admin func(*http.Request) bool) http.Handler {
	// Built on the first request: the tools' schemas come from reflection.
	//
	// Stateless: each request stands alone, so any replica can answer it
	// and a restart loses no client's session. The tools never ask the
	// client anything. The localhost check guards servers without auth
	// against DNS rebinding; a page rebound to this host has no token,
	// and a reverse proxy on this host sends its own Host.
	h := httpserve.Lazy(func() http.Handler {
		srv := build()
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !on() {
			httpserve.WriteError(w, http.StatusNotFound, "not_found", "the MCP server is off here (http.mcp: false in the config)")
			return
		}
		if !admin(r) {
			w.Header().Set("WWW-Authenticate", api.Challenge)
			httpserve.WriteError(w, http.StatusUnauthorized, "unauthorized", "/mcp needs one of http.tokens as a bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}
