package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// toHolder passes a request about a session another replica is running
// to that replica, so status, abort, the event stream, permission
// answers and tool results meet the run where it is. Requests for a
// session nobody runs, or run here, are served here. It runs only on
// authenticated requests (api.Options.Authenticated), and serves here
// whatever it holds only a request another replica passed on, proven so
// (cluster's VerifyHop): a client's hop header is removed.
func (d *Daemon) toHolder(next http.Handler) http.Handler {
	if d.replicas == nil {
		return stripHop(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if proof := r.Header.Get(replicaHop); proof != "" {
			if d.replicas.m.VerifyHop(r.Context(), proof, r.Method, r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			d.log.Warn("an API request claimed to come from another replica without proof; it is served as a client's", "path", r.URL.Path)
			r.Header.Del(replicaHop)
		}
		id, ok := sessionOfPath(r.URL.Path)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		target, holder := d.holderURL(r.Context(), sessions.ID(id))
		if target == nil {
			next.ServeHTTP(w, r)
			return
		}
		// A holder that stops beating (cut off from the database,
		// frozen) is not waited for: the request ends with a 503, and
		// the client's retry finds the session's new holder.
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		go d.watchHolder(ctx, holder, cancel)
		r = r.WithContext(ctx)
		proxy := &httputil.ReverseProxy{
			Transport: d.replicas.transport,
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Header.Set(replicaHop, d.replicas.m.SignHop(pr.Out.Method, pr.Out.URL.Path))
			},
			FlushInterval: -1, // the event stream goes out as it comes
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				d.log.Warn("pass a request to the replica running its session", "path", r.URL.Path, "error", err)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, `{"error":{"code":"unavailable","message":"the replica running this session is not answering; try again in a few seconds (another replica takes it over if it died)"}}`)
			},
		}
		proxy.ServeHTTP(w, r)
	})
}

// stripHop removes the hop header where there are no replicas: no
// request is another's.
func stripHop(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(replicaHop)
		next.ServeHTTP(w, r)
	})
}

// sessionOfPath is the session a /v1/sessions/{id}/... path names.
func sessionOfPath(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v1/sessions/")
	if !ok {
		return "", false
	}
	id, sub, ok := strings.Cut(rest, "/")
	return id, ok && id != "" && sub != ""
}

// errHolderLate ends a request passed to a replica whose heartbeat
// stopped.
var errHolderLate = errors.New("the replica running the session stopped renewing its lease")

// watchHolder cancels ctx with errHolderLate once holder's heartbeat is
// late, until ctx ends.
func (d *Daemon) watchHolder(ctx context.Context, holder string, cancel context.CancelCauseFunc) {
	t := time.NewTicker(holderCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if d.replicas.m.Late(holder) {
				cancel(errHolderLate)
				return
			}
		}
	}
}

// holderCheck is how often a passed request checks on its holder.
const holderCheck = 200 * time.Millisecond

// holderURL is the API of the live replica, other than this one, that
// runs the session (claiming it here when nobody does), and its id; or
// nil.
func (d *Daemon) holderURL(ctx context.Context, id sessions.ID) (*url.URL, string) {
	r := d.replicas
	r.laneMu.Lock()
	hold, ok := r.laneOf[id]
	r.laneMu.Unlock()
	if !ok {
		s, err := d.sessions.Session(ctx, id)
		if err != nil {
			return nil, ""
		}
		hold = cluster.LaneHold(gateway.LaneKey(s.Key))
		r.laneMu.Lock()
		if r.laneOf == nil || len(r.laneOf) >= 100_000 {
			r.laneOf = map[sessions.ID]string{}
		}
		r.laneOf[id] = hold
		r.laneMu.Unlock()
	}
	raw, holder, err := r.m.RouteHolder(ctx, hold)
	if err != nil || raw == "" {
		return nil, ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, ""
	}
	return u, holder
}

// abortOnHolder stops the running turn of key's session on the replica
// that runs it, when another does (a reset through this one's API).
func (d *Daemon) abortOnHolder(ctx context.Context, key sessions.Key) {
	if d.replicas == nil || len(d.cfg().HTTP.Tokens) == 0 {
		return
	}
	s, err := d.sessions.Active(ctx, key)
	if err != nil {
		return
	}
	u, _ := d.holderURL(ctx, s.ID)
	if u == nil {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.JoinPath("/v1/sessions", string(s.ID), "abort").String(), nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+d.cfg().HTTP.Tokens[0].Reveal())
	req.Header.Set(replicaHop, d.replicas.m.SignHop(req.Method, req.URL.Path))
	resp, err := (&http.Client{Transport: d.replicas.transport}).Do(req)
	if err != nil {
		d.log.Warn("stop a reset session's turn on the replica running it", "session_id", s.ID, "error", err)
		return
	}
	resp.Body.Close()
}
