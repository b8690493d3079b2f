// Package openai is the llm.Model for OpenAI's Chat Completions API, through
// the official SDK. With BaseURL it also serves OpenAI-compatible servers
// (Ollama, vLLM, OpenRouter).
package openai

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/parleyd/parley/llm"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Options configures a Model. Nothing is read from the environment.
type Options struct {
	APIKey string
	// BaseURL points at an OpenAI-compatible server, e.g.
	// "http://localhost:11434/v1" for Ollama; empty means DefaultBaseURL.
	BaseURL string
	// HTTPClient defaults to http.DefaultClient.
	HTTPClient *http.Client
}

// Model calls one OpenAI-compatible endpoint.
type Model struct {
	client openai.Client
	apiKey string // only to redact it from error messages
}

var _ llm.Model = (*Model)(nil)

// New returns a Model. The SDK's own retries are off: wrap the Model in
// llm.WithRetry, which retries visibly.
func New(o Options) *Model {
	base := o.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	opts := []option.RequestOption{
		option.WithAPIKey(o.APIKey),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		option.WithMiddleware(normalizeErrorBody),
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	return &Model{client: openai.NewClient(opts...), apiKey: o.APIKey}
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	p, err := params(req)
	if err != nil {
		return llm.Response{}, fmt.Errorf("%s: %w", provider, err)
	}
	emit := func(d llm.Delta) {
		if onDelta != nil {
			onDelta(d)
		}
	}
	stream := m.client.Chat.Completions.NewStreaming(ctx, p)
	defer stream.Close()
	var acc accumulator
	for stream.Next() {
		acc.add(stream.Current(), emit)
	}
	streamErr := stream.Err()
	switch {
	case streamErr == nil && acc.finish != "":
		return acc.response(true), nil
	case ctx.Err() != nil:
		resp := acc.response(false)
		resp.StopReason = llm.StopAborted
		return resp, fmt.Errorf("%s: stream: %w", provider, ctx.Err())
	case streamErr != nil:
		resp := acc.response(false)
		resp.StopReason = llm.StopError
		return resp, m.mapError(streamErr)
	default:
		resp := acc.response(false)
		resp.StopReason = llm.StopError
		return resp, fmt.Errorf("%s: %w", provider, llm.ErrIncompleteStream)
	}
}

// accumulator folds chunks into a response. Only choice 0 is read.
type accumulator struct {
	text   strings.Builder
	calls  []*callAcc // in order of first appearance
	finish string
	model  string
	usage  llm.Usage
}

type callAcc struct {
	index   int64
	id      string
	name    string
	args    strings.Builder
	started bool
}

func (a *accumulator) add(c openai.ChatCompletionChunk, emit func(llm.Delta)) {
	if a.model == "" {
		a.model = c.Model
	}
	if c.JSON.Usage.Valid() {
		a.usage = usage(c.Usage)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		for _, text := range []string{ch.Delta.Content, ch.Delta.Refusal} {
			if text != "" {
				a.text.WriteString(text)
				emit(llm.Delta{Text: text})
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			call := a.call(tc.Index)
			if call.id == "" {
				call.id = tc.ID
			}
			call.name += tc.Function.Name
			call.args.WriteString(tc.Function.Arguments)
			if !call.started && call.id != "" && call.name != "" {
				call.started = true
				emit(llm.Delta{ToolCallStarted: &llm.ToolCall{ID: call.id, Name: call.name}})
			}
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
}

func (a *accumulator) call(index int64) *callAcc {
	for _, c := range a.calls {
		if c.index == index {
			return c
		}
	}
	c := &callAcc{index: index}
	a.calls = append(a.calls, c)
	return c
}

// response builds the result. Unless finished, the last tool call is left
// out: calls stream one after another, so only it can be cut off.
func (a *accumulator) response(finished bool) llm.Response {
	r := llm.Response{
		Text:       a.text.String(),
		Usage:      a.usage,
		StopReason: stopReason(a.finish),
		Model:      a.model,
	}
	calls := a.calls
	if !finished && len(calls) > 0 {
		calls = calls[:len(calls)-1]
	}
	for _, c := range calls {
		id := c.id
		if id == "" { // some compatible servers send none
			id = "call_" + strconv.FormatInt(c.index, 10)
		}
		args := c.args.String()
		if args == "" {
			args = "{}"
		}
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: id, Name: c.name, Arguments: []byte(args)})
	}
	return r
}

// usage maps OpenAI's counts so the five never overlap: cached and
// cache-written tokens come out of prompt_tokens, reasoning tokens out of
// completion_tokens.
func usage(u openai.CompletionUsage) llm.Usage {
	cacheRead := u.PromptTokensDetails.CachedTokens
	cacheWrite := u.PromptTokensDetails.CacheWriteTokens
	reasoning := u.CompletionTokensDetails.ReasoningTokens
	return llm.Usage{
		Input:      max(0, u.PromptTokens-cacheRead-cacheWrite),
		Output:     max(0, u.CompletionTokens-reasoning),
		Reasoning:  reasoning,
		CacheRead:  cacheRead,
		CacheWrite: cacheWrite,
	}
}

func stopReason(finish string) string {
	switch finish {
	case "stop":
		return llm.StopEnd
	case "tool_calls", "function_call":
		return llm.StopToolUse
	case "length":
		return llm.StopMaxTokens
	case "content_filter":
		return llm.StopContentFilter
	}
	return finish
}
