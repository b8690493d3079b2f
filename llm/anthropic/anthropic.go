// Package anthropic is the llm.Model for Anthropic's Messages API: a thin
// client over net/http that streams with a small SSE reader
// (llm/internal/sse).
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/sse"
	"github.com/parleyd/parley/llm/internal/wire"
)

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com"

// apiVersion is the anthropic-version header: the Messages API version whose
// request and event shapes this package speaks.
const apiVersion = "2026-10-21"

// Options configures a Model. Nothing is read from the environment.
type Options struct {
	APIKey string
	// BaseURL defaults to DefaultBaseURL; requests go to BaseURL +
	// "/v1/messages".
	BaseURL string
	// HTTPClient defaults to a shared client that keeps idle connections
	// for reuse (see wire.DefaultClient).
	HTTPClient *http.Client
	// Timeouts bound each call (see llm.Timeouts); zero fields are
	// llm.DefaultTimeouts'.
	Timeouts llm.Timeouts
}

// Model calls Anthropic's Messages API. It is safe for concurrent use.
type Model struct {
	url    string
	apiKey string // sent as x-api-key, and redacted from error messages
	client *http.Client
}

var _ llm.Model = (*Model)(nil)

// New returns a Model. It never retries by itself: wrap the Model in
// llm.WithRetry, which retries visibly.
func New(o Options) *Model {
	return &Model{url: wire.Endpoint(o.BaseURL, DefaultBaseURL, "/v1/messages"), apiKey: o.APIKey, client: wire.Client(o.HTTPClient, provider, o.Timeouts)}
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	p, err := params(req)
	if err != nil {
		return llm.Response{}, fmt.Errorf("%s: %w", provider, err)
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return llm.Response{}, fmt.Errorf("%s: encode request: %w", provider, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, &body)
	if err != nil {
		return llm.Response{}, fmt.Errorf("%s: %w", provider, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("Anthropic-Version", apiVersion)
	if m.apiKey != "" {
		hreq.Header.Set("X-Api-Key", m.apiKey)
	}
	res, err := m.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return llm.Response{}, fmt.Errorf("%s: %w", provider, ctx.Err())
		}
		return llm.Response{}, fmt.Errorf("%s: %w", provider, err) // a *url.Error: retryable
	}
	if res.StatusCode >= 300 {
		defer wire.Drain(res.Body)
		return llm.Response{}, m.statusError(res)
	}
	// A stream that failed is closed at once; a finished one is read on to
	// its end, briefly, so its connection is kept (wire.Finish).
	finished := false
	defer wire.End(res.Body, &finished)

	emit := func(d llm.Delta) {
		if onDelta != nil {
			onDelta(d)
		}
	}
	acc := accumulator{m: m, model: req.Model, blocks: map[int]*blockAcc{}}
	sr := sse.NewReader(res.Body)
	streamErr := acc.read(sr, emit)
	sr.Release()
	resp := acc.response()
	finished = streamErr == nil
	switch {
	case streamErr == nil:
		return resp, nil
	case ctx.Err() != nil:
		resp.StopReason = llm.StopAborted
		return resp, fmt.Errorf("%s: stream: %w", provider, ctx.Err())
	default:
		resp.StopReason = llm.StopError
		return resp, streamErr
	}
}

func init() {
	llm.Register(llm.Provider{Name: "anthropic", DefaultBaseURL: DefaultBaseURL, KeyEnv: "ANTHROPIC_API_KEY", SmallModel: "claude-haiku-4-5",
		New: func(s llm.Settings) llm.Model {
			return New(Options{APIKey: s.APIKey, BaseURL: s.BaseURL, Timeouts: s.Timeouts})
		}})
}
