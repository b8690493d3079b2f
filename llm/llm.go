// Package llm is the provider-neutral model interface the agent loop calls.
//
// A provider (llm/openai, llm/anthropic, llm/echo) turns a [Request] into one
// streamed model call and returns the whole [Response]. Retrying is not the
// providers' job: wrap a model in [WithRetry] so every retry is visible.
package llm

import (
	"context"
	"encoding/json"
)

// Role is who a message is from.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	// RoleTool carries one tool result; ToolCallID names the call it answers.
	RoleTool Role = "tool"
)

// Message is one turn of the conversation sent to the model.
type Message struct {
	Role    Role
	Content string
	// Images are attached to user messages (and tool results where the
	// provider allows it).
	Images []Image
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID is set on a RoleTool message: the call this result answers.
	ToolCallID string
	// Thinking is set on an assistant message: the reasoning blocks its
	// response carried (Response.Thinking), sent back unchanged where the
	// provider requires it (Anthropic, after extended thinking with tools).
	Thinking []Thinking
}

// Thinking is one block of a model's reasoning that the provider needs back
// verbatim in the next request of the same turn. It is not shown to users.
type Thinking struct {
	// Text is the reasoning as the provider returned it (summarized, or
	// empty when the provider omits it).
	Text string
	// Signature is the provider's proof that the block is its own.
	Signature string
	// Redacted is the encrypted payload of a redacted block; Text and
	// Signature are then empty.
	Redacted string
}

// Image is raw image bytes; providers encode them as they need.
type Image struct {
	MediaType string // e.g. "image/png"
	Data      []byte
}

// ToolCall is one call the model asked for.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON object the model wrote. It is what the model sent,
	// so it can be invalid JSON: check it before use.
	Arguments json.RawMessage
}

// Tool describes a tool the model may call.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments object. Empty means no
	// arguments.
	Schema json.RawMessage
}

// Request is one model call.
type Request struct {
	// Model is the provider's own model name, e.g. "gpt-4o-mini" (see
	// [ParseModel]).
	Model string
	// System is the system prompt. Providers that cache prompts cache it.
	System      string
	Messages    []Message
	Tools       []Tool
	Temperature *float64
	// MaxTokens caps the output; 0 means the provider's default.
	MaxTokens int
	// ReasoningEffort asks a reasoning model to think more or less before
	// answering: "low", "medium" or "high"; "" leaves the provider's
	// default. OpenAI takes it as reasoning_effort; Anthropic as extended
	// thinking with a budget of ThinkingBudget(effort) tokens.
	ReasoningEffort string
}

// ReasoningEfforts are the values Request.ReasoningEffort takes.
var ReasoningEfforts = []string{"low", "medium", "high"}

// ThinkingBudget is the thinking budget, in tokens, an effort maps to for
// a provider that takes a budget (Anthropic): 0 for "" or an unknown one.
func ThinkingBudget(effort string) int {
	switch effort {
	case "low":
		return 1024
	case "medium":
		return 4096
	case "high":
		return 16384
	}
	return 0
}

// Usage counts tokens for one model call. The five counts never overlap, so
// their sum is the whole context the call used:
//   - Input is the prompt tokens EXCLUDING CacheRead and CacheWrite (OpenAI's
//     prompt_tokens includes cached tokens; they are taken out here).
//   - Output is the generated tokens EXCLUDING Reasoning (OpenAI's
//     completion_tokens and Anthropic's output_tokens include reasoning; it
//     is taken out here).
//   - Reasoning is the hidden reasoning/thinking tokens.
//   - CacheRead is prompt tokens served from the provider's prompt cache.
//   - CacheWrite is prompt tokens written to the prompt cache.
type Usage struct {
	Input      int64
	Output     int64
	Reasoning  int64
	CacheRead  int64
	CacheWrite int64
}

// Total is the sum of the five counts.
func (u Usage) Total() int64 {
	return u.Input + u.Output + u.Reasoning + u.CacheRead + u.CacheWrite
}

// Add returns the element-wise sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Input:      u.Input + v.Input,
		Output:     u.Output + v.Output,
		Reasoning:  u.Reasoning + v.Reasoning,
		CacheRead:  u.CacheRead + v.CacheRead,
		CacheWrite: u.CacheWrite + v.CacheWrite,
	}
}

// Normalised stop reasons. A provider reason with no equivalent is passed
// through as the provider spelled it.
const (
	StopEnd           = "end"            // the model finished its turn
	StopToolUse       = "tool_use"       // the model wants tool results
	StopMaxTokens     = "max_tokens"     // the output hit MaxTokens
	StopContentFilter = "content_filter" // the provider filtered or refused
	StopAborted       = "aborted"        // ctx was cancelled mid-stream
	StopError         = "error"          // the stream failed mid-way
)

// Response is the whole result of one model call. When Stream returns an
// error after streaming started, Response holds what arrived before it.
type Response struct {
	// Text is the concatenation of every Delta.Text streamed.
	Text string
	// ToolCalls holds only complete calls: a call cut off by an abort is left
	// out.
	ToolCalls  []ToolCall
	Usage      Usage
	StopReason string
	// Model is the model name the provider reported.
	Model string
	// Thinking holds the complete reasoning blocks, in order, for the
	// assistant message that carries this response back (Message.Thinking).
	Thinking []Thinking
}

// Delta is one streamed event. Exactly one field is set.
type Delta struct {
	// Text is the next fragment of the reply.
	Text string
	// ToolCallStarted announces a tool call as soon as its ID and Name are
	// known; Arguments is empty. The complete call is in Response.ToolCalls.
	ToolCallStarted *ToolCall
}

// Model is one language-model provider.
type Model interface {
	// Stream makes one model call. It calls onDelta (which may be nil) from
	// the calling goroutine as text arrives and returns the whole response.
	//
	// When ctx is cancelled mid-stream it returns promptly with the partial
	// Response (the text and the complete tool calls received so far) and an
	// error that wraps ctx.Err() (so errors.Is(err, context.Canceled)).
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error)
}
