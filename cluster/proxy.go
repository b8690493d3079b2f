package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// HopHeader marks an API request one replica passed to another, which
// serves it whatever it holds. Its value proves it (SignHop); a request
// without that proof, a client's, has it removed.
const HopHeader = "X-Parley-Replica-Hop"

// Proxy passes a request about a session another replica is running to
// that replica, so status, abort, the event stream, permission answers and
// tool results meet the run where it is.
type Proxy struct {
	m *Member
	// lane is the lane hold (LaneHold) of the session with an id.
	lane func(ctx context.Context, sessionID string) (string, error)
	log  *slog.Logger
	// transport passes API requests to other replicas: one that stops
	// answering mid-request (frozen) fails the request after two minutes
	// (the longest a compaction may take to answer); new requests wait
	// out a late holder instead (Member.Route).
	transport *http.Transport
	// laneOf is each session's lane hold, as requests name sessions by
	// id (a session's key never changes); emptied when full.
	laneMu sync.Mutex
	laneOf map[string]string
}

// NewProxy passes requests for m; lane finds a session's lane hold.
func NewProxy(m *Member, lane func(ctx context.Context, sessionID string) (string, error), log *slog.Logger) *Proxy {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 2 * time.Minute // a compaction answers when it is done
	return &Proxy{m: m, lane: lane, log: log, transport: tr}
}

// Handler passes a request for a session another replica runs to it.
// Requests for a session nobody runs, or run here, are served here. It
// runs only on authenticated requests (api.Options.Authenticated), and
// serves here whatever it holds only a request another replica passed on,
// proven so (VerifyHop): a client's hop header is removed.
func (p *Proxy) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if proof := r.Header.Get(HopHeader); proof != "" {
			if p.m.VerifyHop(r.Context(), proof, r.Method, r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			p.log.Warn("an API request claimed to come from another replica without proof; it is served as a client's", "path", r.URL.Path)
			r.Header.Del(HopHeader)
		}
		id, ok := sessionOfPath(r.URL.Path)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		target, holder := p.holderURL(r.Context(), id)
		if target == nil {
			next.ServeHTTP(w, r)
			return
		}
		// A holder that stops beating (cut off from the database,
		// frozen) is not waited for: the request ends with a 503, and
		// the client's retry finds the session's new holder.
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		go p.watchHolder(ctx, holder, cancel)
		r = r.WithContext(ctx)
		proxy := &httputil.ReverseProxy{
			Transport: p.transport,
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Header.Set(HopHeader, p.m.SignHop(pr.Out.Method, pr.Out.URL.Path))
			},
			FlushInterval: -1, // the event stream goes out as it comes
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				p.log.Warn("pass a request to the replica running its session", "path", r.URL.Path, "error", err)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, `{"error":{"code":"unavailable","message":"the replica running this session is not answering; try again in a few seconds (another replica takes it over if it died)"}}`)
			},
		}
		proxy.ServeHTTP(w, r)
	})
}

// StripHop removes the hop header where there are no replicas: no request
// is another's.
func StripHop(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(HopHeader)
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
func (p *Proxy) watchHolder(ctx context.Context, holder string, cancel context.CancelCauseFunc) {
	t := time.NewTicker(holderCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if p.m.Late(holder) {
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
func (p *Proxy) holderURL(ctx context.Context, id string) (*url.URL, string) {
	p.laneMu.Lock()
	hold, ok := p.laneOf[id]
	p.laneMu.Unlock()
	if !ok {
		var err error
		if hold, err = p.lane(ctx, id); err != nil {
			return nil, ""
		}
		p.laneMu.Lock()
		if p.laneOf == nil || len(p.laneOf) >= 100_000 {
			p.laneOf = map[string]string{}
		}
		p.laneOf[id] = hold
		p.laneMu.Unlock()
	}
	raw, holder, err := p.m.RouteHolder(ctx, hold)
	if err != nil || raw == "" {
		return nil, ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, ""
	}
	return u, holder
}

// Abort stops the running turn of a session on the replica that runs it,
// when another does (a reset through this one's API), with an API token
// of the replicas'.
func (p *Proxy) Abort(ctx context.Context, sessionID, token string) {
	u, _ := p.holderURL(ctx, sessionID)
	if u == nil {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.JoinPath("/v1/sessions", sessionID, "abort").String(), nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(HopHeader, p.m.SignHop(req.Method, req.URL.Path))
	resp, err := (&http.Client{Transport: p.transport}).Do(req)
	if err != nil {
		p.log.Warn("stop a reset session's turn on the replica running it", "session_id", sessionID, "error", err)
		return
	}
	resp.Body.Close()
}
