package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/parleyd/parley/adapters"
)

// transport carries discordgo's REST calls. It sends them to api_url when
// one is set, answers gateway discovery with gateway_url when one is set,
// and gives calls made without a context (discordgo's own GET /gateway in
// Open) the adapter's run context, so shutdown cuts them short.
//
// discordgo's endpoints are package variables (discordgo.EndpointAPI and
// the rest) shared by every session in the process; rewriting here leaves
// them alone, so adapters with different api_urls, and parallel tests, can
// share a process.
type transport struct {
	base    http.RoundTripper
	api     *url.URL // nil: discord.com itself
	gateway string   // "": ask the API
	host    string   // discordgo's host, "discord.com"
	// gatewayPaths are the discovery endpoints' paths on that host.
	gatewayPaths map[string]bool
	runCtx       atomic.Pointer[context.Context]
}

func newTransport(s settings) *transport {
	t := &transport{
		base:         adapters.GuardDeadline(http.DefaultTransport),
		api:          s.api,
		gateway:      s.gateway,
		gatewayPaths: map[string]bool{},
	}
	if u, err := url.Parse(discordgo.EndpointDiscord); err == nil {
		t.host = u.Host
	}
	for _, e := range []string{discordgo.EndpointGateway, discordgo.EndpointGatewayBot} {
		if u, err := url.Parse(e); err == nil {
			t.gatewayPaths[u.Path] = true
		}
	}
	return t
}

// setRunContext makes ctx the context of requests made without one.
func (t *transport) setRunContext(ctx context.Context) { t.runCtx.Store(&ctx) }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Done() == nil {
		if p := t.runCtx.Load(); p != nil {
			req = req.WithContext(*p)
		}
	}
	if req.URL.Host == t.host {
		if t.gateway != "" && req.Method == http.MethodGet && t.gatewayPaths[req.URL.Path] {
			return t.gatewayResponse(req), nil
		}
		if t.api != nil {
			req = req.Clone(req.Context())
			req.URL.Scheme = t.api.Scheme
			req.URL.Host = t.api.Host
			req.URL.Path = t.api.Path + req.URL.Path
			req.URL.RawPath = ""
			req.Host = ""
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		normalize429(resp)
	}
	return resp, nil
}

// gatewayResponse answers GET /gateway (and /gateway/bot) with gateway_url.
func (t *transport) gatewayResponse(req *http.Request) *http.Response {
	body := map[string]any{"url": t.gateway}
	if strings.HasSuffix(req.URL.Path, "/bot") {
		body["shards"] = 1
		body["session_start_limit"] = map[string]any{"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
	}
	b, _ := json.Marshal(body)
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
		Request:       req,
	}
}

// normalize429 makes sure a 429's body carries retry_after, which is what
// discordgo reads to build its RateLimitError: a 429 from a proxy or from
// Cloudflare may have only the Retry-After header, or an HTML body, which
// discordgo would report as a JSON error instead of a rate limit.
func normalize429(resp *http.Response) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	var v struct {
		RetryAfter *float64 `json:"retry_after"`
	}
	if err == nil && json.Unmarshal(b, &v) == nil && v.RetryAfter != nil {
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return
	}
	secs := 1.0
	if s, perr := strconv.ParseFloat(strings.TrimSpace(resp.Header.Get("Retry-After")), 64); perr == nil && s >= 0 {
		secs = s
	}
	b, _ = json.Marshal(map[string]any{
		"message":     "rate limited",
		"retry_after": secs,
		"global":      strings.EqualFold(resp.Header.Get("X-RateLimit-Global"), "true"),
	})
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Del("Content-Length")
	resp.Header.Set("Content-Type", "application/json")
}

// dialer dials the gateway, keeping its connections so that a shutdown
// can cut an Open that is stuck in the handshake: discordgo's Open takes
// no context.
type dialer struct {
	mu    sync.Mutex
	ctx   context.Context
	conns map[*trackedConn]struct{}
}

func newDialer(ctx context.Context) *dialer {
	return &dialer{ctx: ctx, conns: map[*trackedConn]struct{}{}}
}

func (d *dialer) dial(_ context.Context, network, addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	c, err := nd.DialContext(d.ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, d: d}
	d.mu.Lock()
	d.conns[tc] = struct{}{}
	d.mu.Unlock()
	// A shutdown that came while dialling closed what was tracked then.
	if err := d.ctx.Err(); err != nil {
		_ = tc.Close()
		return nil, err
	}
	return tc, nil
}

// closeAll closes every connection still open.
func (d *dialer) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.conns {
		_ = c.Conn.Close()
		delete(d.conns, c)
	}
}

type trackedConn struct {
	net.Conn
	d *dialer
}

func (c *trackedConn) Close() error {
	c.d.mu.Lock()
	delete(c.d.conns, c)
	c.d.mu.Unlock()
	return c.Conn.Close()
}
