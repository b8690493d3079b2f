package mcpserve

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Forwarder is parley's MCP server in front of a running daemon's /mcp:
// `parley mcp serve` beside a daemon. It offers the daemon's tools and
// passes each call on, and the progress the daemon reports back.
type Forwarder struct {
	endpoint string
	remote   *mcp.ClientSession

	mu      sync.Mutex
	waiting map[any]*mcp.ServerSession // by progress token, the calls that asked for progress
}

// Dial connects to the /mcp endpoint of a running parley with one of its
// API tokens and reads its tools. Close it when done.
func Dial(ctx context.Context, endpoint, token, version string) (*Forwarder, error) {
	f := &Forwarder{endpoint: endpoint, waiting: map[any]*mcp.ServerSession{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "parley-mcp-serve", Version: cmp.Or(version, "dev")},
		&mcp.ClientOptions{ProgressNotificationHandler: f.progress})
	hc := &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
	remote, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	f.remote = remote
	return f, nil
}

// Server is an MCP server with the daemon's tools, each forwarded.
func (f *Forwarder) Server(ctx context.Context, version string) (*mcp.Server, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "parley", Title: "parley", Version: cmp.Or(version, "dev")}, &mcp.ServerOptions{
		Instructions: f.remote.InitializeResult().Instructions,
	})
	for t, err := range f.remote.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list the tools of %s: %w", f.endpoint, err)
		}
		srv.AddTool(t, f.call)
	}
	return srv, nil
}

// Close ends the connection to the daemon.
func (f *Forwarder) Close() error { return f.remote.Close() }

// call passes one call to the daemon. A daemon that doesn't answer is an
// error result the client can act on, not a protocol error.
func (f *Forwarder) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	// The call's _meta goes along, its progress token with it (as it came:
	// a number decoded from JSON, which SetProgressToken refuses).
	params := &mcp.CallToolParams{Meta: req.Params.Meta, Name: req.Params.Name, Arguments: req.Params.Arguments}
	if token := req.Params.GetProgressToken(); token != nil {
		f.mu.Lock()
		f.waiting[token] = req.Session
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.waiting, token)
			f.mu.Unlock()
		}()
	}
	res, err := f.remote.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var r mcp.CallToolResult
		r.SetError(fmt.Errorf("the parley at %s didn't answer (%v); check that it still runs, then call again", f.endpoint, err))
		return &r, nil
	}
	return res, nil
}

// progress passes the daemon's progress on to the call that asked for it.
func (f *Forwarder) progress(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	f.mu.Lock()
	ss := f.waiting[req.Params.ProgressToken]
	f.mu.Unlock()
	if ss != nil {
		_ = ss.NotifyProgress(ctx, req.Params)
	}
}

// bearer adds the API token to each request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}
