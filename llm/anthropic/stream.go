package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/sse"
)

// event is one streamed event: message_start, content_block_start,
// content_block_delta, content_block_stop, message_delta, message_stop,
// ping or error. Events of other types are skipped, so a new event type
// does not break the stream.
type event struct {
	Type    string `json:"type"`
	Message *struct {
		Model string    `json:"model"`
		Usage usageJSON `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Data      string          `json:"data"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usageJSON `json:"usage"`
	Error *apiError  `json:"error"`
}

// usageJSON holds the counts as sent: message_start carries them all, and
// message_delta repeats those that changed (output_tokens always), so a
// count that is present replaces the one before.
type usageJSON struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

func (u *usageJSON) merge(v *usageJSON) {
	set := func(dst **int64, src *int64) {
		if src != nil {
			*dst = src
		}
	}
	set(&u.InputTokens, v.InputTokens)
	set(&u.OutputTokens, v.OutputTokens)
	set(&u.CacheCreationInputTokens, v.CacheCreationInputTokens)
	set(&u.CacheReadInputTokens, v.CacheReadInputTokens)
	if v.OutputTokensDetails != nil {
		u.OutputTokensDetails = v.OutputTokensDetails
	}
}

// usage maps Anthropic's counts. input_tokens already excludes the cache
// counts; thinking tokens come out of output_tokens so the five never
// overlap.
func (u *usageJSON) usage() llm.Usage {
	n := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	var thinking int64
	if u.OutputTokensDetails != nil {
		thinking = u.OutputTokensDetails.ThinkingTokens
	}
	return llm.Usage{
		Input:      n(u.InputTokens),
		Output:     max(0, n(u.OutputTokens)-thinking),
		Reasoning:  thinking,
		CacheRead:  n(u.CacheReadInputTokens),
		CacheWrite: n(u.CacheCreationInputTokens),
	}
}

// accumulator folds events into a response.
type accumulator struct {
	m        *Model
	model    string
	usage    usageJSON
	stop     string
	text     strings.Builder
	order    []*blockAcc // content blocks in the order they started
	blocks   map[int]*blockAcc
	complete bool // message_stop arrived
}

type blockAcc struct {
	typ       string
	id, name  string
	input     json.RawMessage // from content_block_start
	partial   strings.Builder // input_json_delta fragments
	deltas    bool            // some input_json_delta arrived
	thinking  strings.Builder
	signature string
	data      string
	closed    bool // content_block_stop arrived
}

// read consumes the stream; it returns nil once message_stop arrives.
func (a *accumulator) read(r *sse.Reader, emit func(llm.Delta)) error {
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %w", provider, llm.ErrIncompleteStream)
		}
		if err != nil {
			return fmt.Errorf("%s: stream: %w", provider, err)
		}
		var e event
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			if ev.Unterminated {
				return fmt.Errorf("%s: %w", provider, llm.ErrIncompleteStream)
			}
			return fmt.Errorf("%s: stream event is not JSON (%w): %s", provider, err, a.m.snippet(ev.Data))
		}
		if e.Type == "" {
			e.Type = ev.Type
		}
		if err := a.apply(&e, emit); err != nil {
			return err
		}
		if a.complete {
			return nil
		}
	}
}

func (a *accumulator) apply(e *event, emit func(llm.Delta)) error {
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			if e.Message.Model != "" {
				a.model = e.Message.Model
			}
			a.usage.merge(&e.Message.Usage)
		}
	case "content_block_start":
		cb := e.ContentBlock
		if cb == nil {
			return nil
		}
		b := &blockAcc{typ: cb.Type, id: cb.ID, name: cb.Name, input: cb.Input, signature: cb.Signature, data: cb.Data}
		b.thinking.WriteString(cb.Thinking)
		a.blocks[e.Index] = b
		a.order = append(a.order, b)
		if cb.Text != "" {
			a.text.WriteString(cb.Text)
			emit(llm.Delta{Text: cb.Text})
		}
		if cb.Type == "tool_use" {
			emit(llm.Delta{ToolCallStarted: &llm.ToolCall{ID: cb.ID, Name: cb.Name}})
		}
	case "content_block_delta":
		b, d := a.blocks[e.Index], e.Delta
		if b == nil || d == nil {
			return nil
		}
		switch d.Type {
		case "text_delta":
			if d.Text != "" {
				a.text.WriteString(d.Text)
				emit(llm.Delta{Text: d.Text})
			}
		case "input_json_delta":
			b.deltas = true
			b.partial.WriteString(d.PartialJSON)
		case "thinking_delta":
			b.thinking.WriteString(d.Thinking)
		case "signature_delta":
			b.signature += d.Signature
		}
	case "content_block_stop":
		if b := a.blocks[e.Index]; b != nil {
			b.closed = true
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			a.stop = e.Delta.StopReason
		}
		if e.Usage != nil {
			a.usage.merge(e.Usage)
		}
	case "message_stop":
		a.complete = true
	case "error":
		return a.m.eventError(e.Error)
	}
	return nil
}

// response builds the result, keeping only the tool_use and thinking blocks
// that were complete.
func (a *accumulator) response() llm.Response {
	r := llm.Response{
		Text:       a.text.String(),
		Usage:      a.usage.usage(),
		StopReason: stopReason(a.stop),
		Model:      a.model,
	}
	for _, b := range a.order {
		if !b.closed && !a.complete {
			continue
		}
		switch b.typ {
		case "tool_use":
			args := []byte(b.partial.String())
			if !b.deltas {
				args = b.input
			}
			if len(bytes.TrimSpace(args)) == 0 {
				args = []byte("{}")
			}
			r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: b.id, Name: b.name, Arguments: args})
		case "thinking":
			if b.signature != "" { // unsigned thinking can't be sent back
				r.Thinking = append(r.Thinking, llm.Thinking{Text: b.thinking.String(), Signature: b.signature})
			}
		case "redacted_thinking":
			if b.data != "" {
				r.Thinking = append(r.Thinking, llm.Thinking{Redacted: b.data})
			}
		}
	}
	return r
}

func stopReason(r string) string {
	switch r {
	case "end_turn", "stop_sequence":
		return llm.StopEnd
	case "tool_use":
		return llm.StopToolUse
	case "max_tokens", "model_context_window_exceeded":
		return llm.StopMaxTokens
	case "refusal":
		return llm.StopContentFilter
	}
	return r
}
