// Package httpserve is the daemon's HTTP server around the API: /healthz
// and /readyz, the web chat and the webhooks beside /v1, /metrics, /mcp
// and the dashboard's mount, the app and ops servers (listening, serving,
// shutting down), their timeouts, the security headers every answer
// carries, and the access log.
package httpserve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
)

// ReadyOptions tunes /readyz: where its failures are logged, which tokens
// see their details, and the SQLite data directory whose free space it
// checks.
type ReadyOptions struct {
	Log *slog.Logger
	// Tokens are the admin tokens; a request carrying one sees why the
	// daemon is not ready (the database's error, the free space).
	Tokens []string
	// DataDir is the SQLite database's directory ("" on PostgreSQL);
	// below MinFree bytes free (DiskFree says) the daemon is not ready.
	DataDir  string
	MinFree  uint64
	DiskFree func(dir string) (uint64, error)
	// MCPDown names the MCP servers that were started and are down: the
	// daemon is degraded, not unready (their tools answer errors).
	MCPDown func() []string
	// Elsewhere, among replicas, says a channel is run by another replica
	// (this one stands by): it is shown so, and degrades nothing.
	Elsewhere func(id adapters.ID) bool
	// Broken says why no write can be promised durable any more (a failed
	// fsync of the SQLite log, until a restart), or nil; default: the
	// database's own (dbutil.DB.Broken).
	Broken func() error
}

// DiskFree is the space an unprivileged writer has left on dir's filesystem.
func DiskFree(dir string) (uint64, error) {
	free, _, err := dbutil.DiskSpace(dir)
	return free, err
}

// Health serves /healthz and /readyz. /readyz needs no token, so it
// says what is down, never where: the database's error (which names its
// user, database and host) goes to the log, and to a request carrying an
// admin token.
func Health(mux *http.ServeMux, db *dbutil.DB, channels map[adapters.ID]adapters.Adapter, ready ...ReadyOptions) {
	var o ReadyOptions
	if len(ready) > 0 {
		o = ready[0]
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Broken == nil {
		o.Broken = db.Broken
	}
	admin := AdminCheck(o.Tokens)
	// The log hears when a check starts failing and when all pass again,
	// not of every probe.
	var mu sync.Mutex
	failing := ""
	note := func(ctx context.Context, check, detail string) {
		mu.Lock()
		defer mu.Unlock()
		if check == failing {
			return
		}
		if check == "" {
			o.Log.InfoContext(ctx, "ready again", "check", failing)
		} else {
			o.Log.WarnContext(ctx, "not ready", "check", check, "detail", detail)
		}
		failing = check
	}

	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	// databaseDown answers 503 with what is wrong with the database; the
	// error itself goes to the log, and to an admin's request.
	databaseDown := func(w http.ResponseWriter, r *http.Request, what string, err error) {
		note(r.Context(), "database", err.Error())
		body := map[string]any{"status": "unavailable", "database": what}
		if admin(r) {
			body["detail"] = err.Error()
		}
		WriteJSON(w, http.StatusServiceUnavailable, body)
	}
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := db.Reader().PingContext(ctx); err != nil {
			databaseDown(w, r, "unreachable", err)
			return
		}
		if err := o.Broken(); err != nil {
			// Every write fails until parley restarts: restarting it is
			// what an orchestrator does for a daemon that stays unready.
			databaseDown(w, r, "not durable: an fsync of the SQLite log failed; check the disk and restart parley", err)
			return
		}
		body := map[string]any{"status": "ready", "database": "ok"}
		if o.DataDir != "" && o.DiskFree != nil {
			free, err := o.DiskFree(o.DataDir)
			switch {
			case err != nil:
				note(r.Context(), "disk", err.Error())
				body["status"], body["disk"] = "unavailable", "unknown"
			case free < o.MinFree:
				note(r.Context(), "disk", fmt.Sprintf("%d bytes free in the database's directory, under database.sqlite.min_free_mb", free))
				body["status"], body["disk"] = "unavailable", "full"
			default:
				body["disk"] = "ok"
			}
			if admin(r) {
				body["disk_free_bytes"] = free
			}
			if body["status"] == "unavailable" {
				WriteJSON(w, http.StatusServiceUnavailable, body)
				return
			}
		}
		note(r.Context(), "", "")
		// A channel that can say how it is (WhatsApp: linked, logged out)
		// shows here. One channel down doesn't make the daemon unready:
		// restarting it would not bring the channel back.
		states := map[string]string{}
		for id, a := range channels {
			if o.Elsewhere != nil && o.Elsewhere(id) {
				states[string(id)] = "standby: another replica runs it"
				continue
			}
			if h, ok := a.(interface{ Health() (bool, string) }); ok {
				healthy, detail := h.Health()
				states[string(id)] = detail
				if !healthy {
					body["status"] = "degraded"
				}
			}
		}
		if len(states) > 0 {
			body["channels"] = states
		}
		if o.MCPDown != nil {
			if down := o.MCPDown(); len(down) > 0 {
				mcp := map[string]string{}
				for _, id := range down {
					mcp[id] = "down"
				}
				body["mcp"], body["status"] = mcp, "degraded"
			}
		}
		WriteJSON(w, http.StatusOK, body)
	})
}

// AdminCheck says whether a request carries one of tokens as its bearer
// token, in constant time.
func AdminCheck(tokens []string) func(r *http.Request) bool {
	var sums [][sha256.Size]byte
	for _, t := range tokens {
		if t = strings.TrimSpace(t); t != "" {
			sums = append(sums, sha256.Sum256([]byte(t)))
		}
	}
	return func(r *http.Request) bool {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || len(sums) == 0 {
			return false
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		match := 0
		for _, t := range sums {
			match |= subtle.ConstantTimeCompare(sum[:], t[:])
		}
		return match == 1
	}
}
