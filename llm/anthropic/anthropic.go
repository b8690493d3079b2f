// Package anthropic is the llm.Model for Anthropic's Messages API, through
// the official SDK.
package anthropic

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/parleyd/parley/llm"
)

// Options configures a Model. Nothing is read from the environment.
type Options struct {
	APIKey string
	// BaseURL defaults to Anthropic's API.
	BaseURL string
	// HTTPClient defaults to the SDK's client.
	HTTPClient *http.Client
}

// Model calls Anthropic's Messages API.
type Model struct {
	client anthropic.Client
	apiKey string // only to redact it from error messages
}

var _ llm.Model = (*Model)(nil)

// New returns a Model. The SDK's own retries are off: wrap the Model in
// llm.WithRetry, which retries visibly.
func New(o Options) *Model {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(o.APIKey),
		option.WithMaxRetries(0),
	}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(o.HTTPClient))
	}
	return &Model{client: anthropic.NewClient(opts...), apiKey: o.APIKey}
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
	stream := m.client.Messages.NewStreaming(ctx, p)
	defer stream.Close()

	var (
		msg      anthropic.Message
		text     strings.Builder
		closed   = map[int64]bool{} // content blocks whose content_block_stop arrived
		complete bool               // message_stop arrived
		accErr   error
	)
	for !complete && stream.Next() {
		ev := stream.Current()
		if accErr = msg.Accumulate(ev); accErr != nil {
			break
		}
		switch ev.Type {
		case "content_block_start":
			if cb := ev.ContentBlock; cb.Type == "tool_use" {
				emit(llm.Delta{ToolCallStarted: &llm.ToolCall{ID: cb.ID, Name: cb.Name}})
			}
		case "content_block_delta":
			if ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
				text.WriteString(ev.Delta.Text)
				emit(llm.Delta{Text: ev.Delta.Text})
			}
		case "content_block_stop":
			closed[ev.Index] = true
		case "message_stop":
			complete = true
		}
	}
	resp := response(&msg, text.String(), func(i int) bool { return complete || closed[int64(i)] })
	streamErr := stream.Err()
	switch {
	case complete:
		return resp, nil
	case ctx.Err() != nil:
		resp.StopReason = llm.StopAborted
		return resp, fmt.Errorf("%s: stream: %w", provider, ctx.Err())
	case streamErr != nil:
		resp.StopReason = llm.StopError
		return resp, m.mapError(streamErr)
	case accErr != nil:
		resp.StopReason = llm.StopError
		return resp, fmt.Errorf("%s: stream: %w", provider, accErr)
	default:
		resp.StopReason = llm.StopError
		return resp, fmt.Errorf("%s: %w", provider, llm.ErrIncompleteStream)
	}
}

// response builds the result from the accumulated message, keeping the
// tool_use blocks for which done reports true.
func response(msg *anthropic.Message, text string, done func(i int) bool) llm.Response {
	r := llm.Response{
		Text:       text,
		Usage:      usage(msg.Usage),
		StopReason: stopReason(string(msg.StopReason)),
		Model:      string(msg.Model),
	}
	for i, cb := range msg.Content {
		if cb.Type != "tool_use" || !done(i) {
			continue
		}
		args := append([]byte(nil), cb.Input...)
		if len(args) == 0 {
			args = []byte("{}")
		}
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: cb.ID, Name: cb.Name, Arguments: args})
	}
	return r
}

// usage maps Anthropic's counts. input_tokens already excludes the cache
// counts; thinking tokens come out of output_tokens so the five never
// overlap.
func usage(u anthropic.Usage) llm.Usage {
	thinking := u.OutputTokensDetails.ThinkingTokens
	return llm.Usage{
		Input:      u.InputTokens,
		Output:     max(0, u.OutputTokens-thinking),
		Reasoning:  thinking,
		CacheRead:  u.CacheReadInputTokens,
		CacheWrite: u.CacheCreationInputTokens,
	}
}

func stopReason(r string) string {
	switch anthropic.StopReason(r) {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		return llm.StopEnd
	case anthropic.StopReasonToolUse:
		return llm.StopToolUse
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return llm.StopMaxTokens
	case anthropic.StopReasonRefusal:
		return llm.StopContentFilter
	}
	return r
}
