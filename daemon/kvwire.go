package daemon

import (
	"errors"
	"net/http"

	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/sessions"
)

// kvRoutes serves a session's key/value storage to a request with an API
// token: GET /v1/sessions/{id}/kv (every entry; ?prefix=) and
// GET /v1/sessions/{id}/kv/{key}.
func (d *Daemon) kvRoutes(mux *http.ServeMux, admin func(*http.Request) bool) {
	fail := func(w http.ResponseWriter, status int, code, msg string) {
		writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	guard := func(h func(w http.ResponseWriter, r *http.Request, s sessions.Session)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !admin(r) {
				fail(w, http.StatusUnauthorized, "unauthorized", "send one of http.tokens as a bearer token")
				return
			}
			s, err := d.sessions.Session(r.Context(), sessions.ID(r.PathValue("id")))
			if err != nil {
				fail(w, http.StatusNotFound, "not_found", "no session has that id")
				return
			}
			h(w, r, s)
		}
	}
	mux.HandleFunc("GET /v1/sessions/{id}/kv", guard(func(w http.ResponseWriter, r *http.Request, s sessions.Session) {
		es, err := d.kv.List(r.Context(), s.ID, r.URL.Query().Get("prefix"))
		if err != nil {
			fail(w, http.StatusServiceUnavailable, "unavailable", "the database didn't answer; try again")
			return
		}
		if es == nil {
			es = []kv.Entry{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"entries": es})
	}))
	mux.HandleFunc("GET /v1/sessions/{id}/kv/{key}", guard(func(w http.ResponseWriter, r *http.Request, s sessions.Session) {
		e, err := d.kv.Get(r.Context(), s.ID, r.PathValue("key"))
		switch {
		case errors.Is(err, kv.ErrNotFound):
			fail(w, http.StatusNotFound, "not_found", "the session has no such key")
		case err != nil:
			fail(w, http.StatusServiceUnavailable, "unavailable", "the database didn't answer; try again")
		default:
			writeJSON(w, http.StatusOK, e)
		}
	}))
}
