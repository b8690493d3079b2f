// Package openai is the llm.Model for OpenAI's Chat Completions API: a thin
// client over net/http that streams with a small SSE reader
// (llm/internal/sse). With BaseURL it also serves OpenAI-compatible servers
// (Ollama, vLLM, OpenRouter, LM Studio, llama.cpp), whose known quirks it
// tolerates; see stream.go.
package openai

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/sse"
	"github.com/parleyd/parley/llm/internal/wire"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Options configures a Model. Nothing is read from the environment.
type Options struct {
	APIKey string
	// BaseURL points at an OpenAI-compatible server, e.g.
	// "http://localhost:11434/v1" for Ollama; empty means DefaultBaseURL.
	BaseURL string
	// HTTPClient defaults to a shared client that keeps idle connections
	// for reuse (see wire.DefaultClient).
	HTTPClient *http.Client
	// Timeouts bound each call (see llm.Timeouts); zero fields are
	// llm.DefaultTimeouts'.
	Timeouts llm.Timeouts
}

// Model calls one OpenAI-compatible endpoint. It is safe for concurrent
// use.
type Model struct {
	url    string // …/chat/completions
	apiKey string // sent as a bearer token, and redacted from error messages
	client *http.Client
	// noUsageOption is set once the server refused stream_options (some
	// compatible servers answer 400 to a field they don't know): later
	// calls leave it out and go without usage figures.
	noUsageOption atomic.Bool
}

var _ llm.Model = (*Model)(nil)

// New returns a Model. It never retries by itself: wrap the Model in
// llm.WithRetry, which retries visibly.
func New(o Options) *Model {
	return &Model{url: wire.Endpoint(o.BaseURL, DefaultBaseURL, "/chat/completions"), apiKey: o.APIKey, client: wire.Client(o.HTTPClient, provider, o.Timeouts)}
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	includeUsage := !m.noUsageOption.Load()
	res, err := m.post(ctx, req, includeUsage)
	if err != nil && includeUsage && refusedStreamOptions(err) {
		// Quirk: a server that rejects stream_options (older vLLM, LM Studio
		// and llama.cpp builds, some proxies) is asked again without it.
		m.noUsageOption.Store(true)
		res, err = m.post(ctx, req, false)
	}
	if err != nil {
		return llm.Response{}, err
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
	acc := accumulator{m: m, model: req.Model}
	var (
		body      io.Reader = res.Body
		whole     bool
		streamErr error
	)
	if isJSON(res.Header.Get("Content-Type")) {
		// Either a server that ignored "stream" and sent one JSON
		// completion, or one that streams under the wrong Content-Type:
		// the first byte tells.
		br := bufio.NewReader(res.Body)
		first, _ := firstByte(br)
		body, whole = br, first == '{'
	}
	if whole {
		streamErr = acc.whole(body, emit)
	} else {
		sr := sse.NewReader(body)
		streamErr = acc.read(sr, emit)
		sr.Release()
	}
	finished = streamErr == nil
	switch {
	case streamErr == nil:
		return acc.response(true), nil
	case ctx.Err() != nil:
		resp := acc.response(false)
		resp.StopReason = llm.StopAborted
		return resp, fmt.Errorf("%s: stream: %w", provider, ctx.Err())
	default:
		resp := acc.response(false)
		resp.StopReason = llm.StopError
		return resp, streamErr
	}
}

// firstByte peeks at the first byte that is not white space.
func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return 0, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = br.ReadByte()
		default:
			return b[0], nil
		}
	}
}

func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// post sends the request and returns the 2xx response, or the error the
// server answered with.
func (m *Model) post(ctx context.Context, req llm.Request, includeUsage bool) (*http.Response, error) {
	body, err := encodeRequest(wire.Body(sizeHint(req)), req, includeUsage)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", provider, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, wire.NewBody(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", provider, err)
	}
	hreq.ContentLength = int64(len(body))
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if m.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+m.apiKey)
	}
	res, err := m.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", provider, ctx.Err())
		}
		return nil, fmt.Errorf("%s: %w", provider, err) // a *url.Error: retryable
	}
	if res.StatusCode >= 300 {
		defer wire.Drain(res.Body)
		return nil, m.statusError(res)
	}
	return res, nil
}

func init() {
	llm.Register(llm.Provider{Name: "openai", DefaultBaseURL: DefaultBaseURL, KeyEnv: "OPENAI_API_KEY", SmallModel: "gpt-4o-mini",
		New: func(s llm.Settings) llm.Model {
			return New(Options{APIKey: s.APIKey, BaseURL: s.BaseURL, Timeouts: s.Timeouts})
		}})
}
