package openai

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/sse"
)

// The stream is read leniently, because OpenAI-compatible servers differ
// from OpenAI in small ways. Each quirk handled here, and who has it:
//
//   - No [DONE] at the end (some llama.cpp and LM Studio builds, proxies):
//     a stream that ends cleanly after a finish_reason is complete; one
//     that ends without either is cut off (llm.ErrIncompleteStream).
//   - No finish_reason at all, only [DONE] (some vLLM and TGI versions):
//     complete, and the stop reason is inferred (tool calls → tool_use,
//     else end). finish_reason "eos"/"eos_token" (TGI, llama.cpp) is end;
//     "stop" with tool calls (older Ollama, vLLM) is tool_use.
//   - No id, created or model in chunks (Ollama, llama.cpp): none is
//     needed; the model is the requested one until a chunk names it.
//   - "content": null (every server, in role and tool-call chunks): empty.
//   - Tool calls without an id (some Ollama, LocalAI and llama.cpp
//     versions): an id is generated, unique per call ("call_" + random).
//   - Tool calls without an index, each call whole in one delta (Ollama,
//     Gemini's compatible endpoint): a new id or name starts a new call.
//   - Tool-call arguments as a JSON object instead of a JSON string
//     (LocalAI, some llama.cpp builds): the object is taken as it is.
//   - Usage only when stream_options.include_usage is accepted: a 400 that
//     names stream_options makes the Model ask again without it (see
//     Stream), and a stream without usage is not an error (usage is zero).
//     Usage in every chunk (vLLM's continuous usage stats, OpenRouter's
//     usage on the finishing chunk): the last one wins. DeepSeek's
//     prompt_cache_hit_tokens counts as cached tokens.
//   - An error sent mid-stream as data: {"error": {...}} or
//     {"error": "text"} (OpenAI, OpenRouter, vLLM), with or without an
//     "event: error" line.
//   - "data:" without a space, ": comment" keep-alive lines (OpenRouter's
//     ": OPENROUTER PROCESSING"), CRLF line endings: handled by llm/internal/sse.
//   - A server that ignores "stream": true and answers with one JSON
//     chat.completion (some proxies): read as a single chunk; a stream sent
//     under Content-Type application/json is still read as a stream.
//   - Reasoning text in delta.reasoning_content / delta.reasoning
//     (DeepSeek, vLLM reasoning parsers, OpenRouter) is not part of the
//     reply and is left out.

// chunk is one chat.completion.chunk (or, from a server that ignored
// "stream", a whole chat.completion, whose choices carry "message").
type chunk struct {
	Model   string          `json:"model"`
	Choices []choice        `json:"choices"`
	Usage   *usageJSON      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type choice struct {
	Index        int    `json:"index"`
	Delta        delta  `json:"delta"`
	Message      *delta `json:"message"`
	FinishReason string `json:"finish_reason"`
}

type delta struct {
	Content   string          `json:"content"`
	Refusal   string          `json:"refusal"`
	ToolCalls []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// arguments is the fragment as text: a JSON string's value, or an object
// as it was sent.
func (d *toolCallDelta) arguments() string {
	raw := bytes.TrimSpace(d.Function.Arguments)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

type usageJSON struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptCacheHitTokens int64 `json:"prompt_cache_hit_tokens"` // DeepSeek
}

// usage maps OpenAI's counts so the five never overlap: cached and
// cache-written tokens come out of prompt_tokens, reasoning tokens out of
// completion_tokens.
func (u *usageJSON) usage() llm.Usage {
	cacheRead := u.PromptTokensDetails.CachedTokens
	if cacheRead == 0 {
		cacheRead = u.PromptCacheHitTokens
	}
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

// accumulator folds chunks into a response. Only choice 0 is read.
type accumulator struct {
	m      *Model
	text   strings.Builder
	calls  []*callAcc // in order of first appearance
	finish string
	model  string
	usage  llm.Usage
}

type callAcc struct {
	index   int
	id      string
	name    string
	args    strings.Builder
	started bool
}

var doneMarker = []byte("[DONE]")

// read consumes the stream. It returns nil once the stream is complete:
// [DONE], or a clean end after a finish_reason.
func (a *accumulator) read(r *sse.Reader, emit func(llm.Delta)) error {
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			if a.finish != "" {
				return nil
			}
			return fmt.Errorf("%s: %w", provider, llm.ErrIncompleteStream)
		}
		if err != nil {
			return fmt.Errorf("%s: stream: %w", provider, err)
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if bytes.Equal(data, doneMarker) {
			return nil
		}
		if err := a.chunk(data, ev.Unterminated, emit); err != nil {
			return err
		}
	}
}

// whole reads a complete chat.completion, from a server that ignored
// "stream": true, as one chunk.
func (a *accumulator) whole(body io.Reader, emit func(llm.Delta)) error {
	raw, err := io.ReadAll(io.LimitReader(body, sse.MaxEventSize))
	if err != nil {
		return fmt.Errorf("%s: read response: %w", provider, err)
	}
	if err := a.chunk(raw, false, emit); err != nil {
		return err
	}
	if a.finish == "" {
		a.finish = "stop"
	}
	return nil
}

// chunk applies one event's data.
func (a *accumulator) chunk(data []byte, unterminated bool, emit func(llm.Delta)) error {
	var c chunk
	if err := decodeChunk(data, &c); err != nil {
		if unterminated { // the connection ended mid-chunk
			return fmt.Errorf("%s: %w", provider, llm.ErrIncompleteStream)
		}
		return fmt.Errorf("%s: stream chunk is not JSON (%w): %s", provider, err, a.m.snippet(data))
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return classify(a.m.streamStatusError(c.Error))
	}
	a.add(&c, emit)
	return nil
}

func (a *accumulator) add(c *chunk, emit func(llm.Delta)) {
	if c.Model != "" {
		a.model = c.Model
	}
	if c.Usage != nil {
		a.usage = c.Usage.usage()
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		d := &ch.Delta
		if ch.Message != nil {
			d = ch.Message
		}
		for _, text := range []string{d.Content, d.Refusal} {
			if text != "" {
				a.text.WriteString(text)
				emit(llm.Delta{Text: text})
			}
		}
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			call := a.call(tc)
			if call.id == "" {
				call.id = tc.ID
			}
			call.name += tc.Function.Name
			call.args.WriteString(tc.arguments())
			if !call.started && call.name != "" {
				if call.id == "" { // a server that sends none
					call.id = newCallID()
				}
				call.started = true
				emit(llm.Delta{ToolCallStarted: &llm.ToolCall{ID: call.id, Name: call.name}})
			}
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
}

// call finds the call a delta continues, or starts one.
func (a *accumulator) call(tc *toolCallDelta) *callAcc {
	if tc.Index != nil {
		for _, c := range a.calls {
			if c.index == *tc.Index {
				return c
			}
		}
		c := &callAcc{index: *tc.Index}
		a.calls = append(a.calls, c)
		return c
	}
	// No index: a delta with a new id, or a name after a named call,
	// starts a new call; anything else continues the last one.
	if n := len(a.calls); n > 0 {
		last := a.calls[n-1]
		if (tc.ID == "" || tc.ID == last.id) && (tc.Function.Name == "" || last.name == "") {
			return last
		}
	}
	c := &callAcc{index: len(a.calls)}
	a.calls = append(a.calls, c)
	return c
}

// response builds the result. Unless finished, the last tool call is left
// out: calls stream one after another, so only it can be cut off.
func (a *accumulator) response(finished bool) llm.Response {
	r := llm.Response{
		Text:  a.text.String(),
		Usage: a.usage,
		Model: a.model,
	}
	calls := a.calls
	if !finished && len(calls) > 0 {
		calls = calls[:len(calls)-1]
	}
	for _, c := range calls {
		if c.name == "" {
			continue // never named: nothing to call
		}
		id := c.id
		if id == "" {
			id = newCallID()
		}
		args := c.args.String()
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: id, Name: c.name, Arguments: []byte(args)})
	}
	r.StopReason = stopReason(a.finish, len(r.ToolCalls) > 0)
	return r
}

func stopReason(finish string, toolCalls bool) string {
	switch finish {
	case "tool_calls", "function_call":
		return llm.StopToolUse
	case "length":
		return llm.StopMaxTokens
	case "content_filter":
		return llm.StopContentFilter
	case "stop", "eos", "eos_token", "end_turn", "stop_sequence", "":
		if toolCalls {
			return llm.StopToolUse
		}
		return llm.StopEnd
	}
	return finish
}

// newCallID makes an id for a tool call the server sent none for. It must be
// unique within the session's history, so it is random.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
