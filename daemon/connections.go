package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/vault"
)

// connections are people's own tokens as the gateway's /connect sees them.
type connections struct{ d *Daemon }

var _ gateway.Connections = connections{}

// Providers are the providers some MCP server takes people's tokens for;
// none without a secrets key.
func (c connections) Providers() []string {
	if c.d.vault == nil || c.d.vault.Key() == nil {
		return nil
	}
	var out []string
	for _, s := range c.d.cfg().MCP.Servers {
		if p := s.UserToken.Provider; p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (c connections) Connect(ctx context.Context, q dbutil.Querier, user, provider, token string) error {
	u, err := vault.ParseUser(user)
	if err != nil {
		return err
	}
	return c.d.vault.ConnectIn(ctx, q, u, provider, token)
}

func (c connections) Disconnect(ctx context.Context, user, provider string) (bool, error) {
	u, err := vault.ParseUser(user)
	if err != nil {
		return false, err
	}
	return c.d.vault.Disconnect(ctx, u, provider)
}

// maxTokenBody bounds a PUT of a person's token.
const maxTokenBody = 16 << 10

// connectionRoutes serve PUT and DELETE
// /v1/users/{surface}/{user}/connections/{provider} to a request with an
// admin token: they store and forget a person's own token, as /connect
// and /disconnect do in a chat. The token is never sent back.
func (d *Daemon) connectionRoutes(mux *http.ServeMux, admin func(*http.Request) bool) {
	const pattern = "/v1/users/{surface}/{user}/connections/{provider}"
	target := func(w http.ResponseWriter, r *http.Request) (vault.User, string, bool) {
		if !admin(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, "unauthorized", "send one of http.tokens as a bearer token")
			return vault.User{}, "", false
		}
		u := vault.User{Surface: r.PathValue("surface"), ID: r.PathValue("user")}
		provider := r.PathValue("provider")
		if _, err := vault.ParseUser(u.String()); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", err.Error())
			return vault.User{}, "", false
		}
		if err := vault.CheckProvider(provider); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", err.Error())
			return vault.User{}, "", false
		}
		return u, provider, true
	}
	mux.HandleFunc("PUT "+pattern, func(w http.ResponseWriter, r *http.Request) {
		u, provider, ok := target(w, r)
		if !ok {
			return
		}
		var body struct {
			Token string `json:"token"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, maxTokenBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			// The decoder's message may quote the body: never echo it.
			writeError(w, http.StatusBadRequest, "invalid", `send {"token": "..."} as JSON`)
			return
		}
		body.Token = strings.TrimSpace(body.Token)
		if body.Token == "" || strings.ContainsAny(body.Token, " \t\r\n") {
			writeError(w, http.StatusBadRequest, "invalid", "token is empty or has spaces")
			return
		}
		err := d.vault.Connect(r.Context(), u, provider, body.Token)
		switch {
		case errors.Is(err, vault.ErrNoKey):
			writeError(w, http.StatusServiceUnavailable, "unavailable", "parley has no secrets key: set "+vault.EnvKey+" (or secrets.key_file) and restart it")
			return
		case err != nil:
			d.log.ErrorContext(r.Context(), "store a user connection", "user", u.String(), "provider", provider, "error", err)
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the connection was not stored; try again")
			return
		}
		d.log.InfoContext(r.Context(), "user connected a provider", "user", u.String(), "provider", provider, "via", "api")
		writeJSON(w, http.StatusOK, map[string]any{"user": u, "provider": provider, "connected": true})
	})
	mux.HandleFunc("DELETE "+pattern, func(w http.ResponseWriter, r *http.Request) {
		u, provider, ok := target(w, r)
		if !ok {
			return
		}
		found, err := d.vault.Disconnect(r.Context(), u, provider)
		if err != nil {
			d.log.ErrorContext(r.Context(), "delete a user connection", "user", u.String(), "provider", provider, "error", err)
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the connection was not deleted; try again")
			return
		}
		if !found {
			writeError(w, http.StatusNotFound, "not_found", u.String()+" has no "+provider+" connection")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"user": u, "provider": provider, "connected": false})
	})
}
