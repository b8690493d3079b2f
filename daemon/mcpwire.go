package daemon

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/mcpserve"
)

// MCPServer is parley as an MCP server over this daemon: send_message
// goes through the gateway on the channel "mcp", like any channel's
// message, and the sessions tools read the sessions store. `parley mcp
// serve` serves it over stdio; /mcp over streamable HTTP.
func (d *Daemon) MCPServer() *mcp.Server {
	return mcpserve.New(mcpserve.Options{Version: d.version, Submit: d.gw.Submit, Bus: d.bus, Sessions: d.sessions,
		Agents: func() []string {
			agents := d.cfg().Agents
			ids := make([]string, len(agents))
			for i, a := range agents {
				ids[i] = a.ID
			}
			return ids
		},
		Record: func(ctx context.Context, in adapters.Inbound) (gateway.InboundRecord, error) {
			return d.store.InboundOf(ctx, in.Adapter, in.ChatID, in.MessageID)
		},
		Log: d.named("mcp_server")})
}

// mcpRoute serves /mcp, the MCP server over streamable HTTP, to requests
// with an admin token, while http.mcp is on (read at each request, so a
// reload turns it on or off).
func (d *Daemon) mcpRoute(mux *http.ServeMux, admin func(*http.Request) bool) {
	// Built on the first request: the tools' schemas come from reflection.
	//
	// Stateless: each request stands alone, so any replica can answer it
	// and a restart loses no client's session. The tools never ask the
	// client anything. The localhost check guards servers without auth
	// against DNS rebinding; a page rebound to this host has no token,
	// and a reverse proxy on this host sends its own Host.
	h := lazyHandler(func() http.Handler {
		srv := d.MCPServer()
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if !d.cfg().HTTP.MCP {
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
