package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parleyd/parley/llm"
)

// DefaultMaxTokens is sent when the request sets none: Anthropic requires
// max_tokens.
const DefaultMaxTokens = 4096

// messagesRequest is the body of POST /v1/messages: only the fields parley
// sends.
type messagesRequest struct {
	Model     string         `json:"model"`
	MaxTokens int            `json:"max_tokens"`
	System    []block        `json:"system,omitempty"`
	Messages  []message      `json:"messages"`
	Tools     []toolParam    `json:"tools,omitempty"`
	Stream    bool           `json:"stream"`
	Thinking  *thinkingParam `json:"thinking,omitempty"`
}

// thinkingParam turns extended thinking on with a token budget.
type thinkingParam struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is any content block parley sends; the fields a type doesn't use
// stay empty and are left out.
type block struct {
	Type         string        `json:"type"`
	Text         string        `json:"text,omitempty"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
	// image
	Source *imageSource `json:"source,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string  `json:"tool_use_id,omitempty"`
	Content   []block `json:"content,omitempty"`
	// thinking: both fields are required, even when empty
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	// redacted_thinking
	Data string `json:"data,omitempty"`
}

type cacheControl struct {
	Type string `json:"type"` // "ephemeral"
}

var ephemeral = &cacheControl{Type: "ephemeral"}

type imageSource struct {
	Type      string `json:"type"` // "base64"
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type toolParam struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// params turns a neutral request into a Messages API body.
//
// Prompt caching: the system prompt is one text block marked cache_control
// ephemeral, so the tools and system prompt (which come before it in the
// prompt) are served from the cache across turns. System messages inside
// the history (e.g. a compaction summary) follow it as further system
// blocks, outside that cached prefix. The last block of the conversation
// is marked too, so each step of a turn, and the next turn, reads the
// history written by the one before from the cache (Anthropic looks back
// for the longest cached prefix); a prefix shorter than the model's minimum
// (1,024 tokens or more) is simply not cached.
//
// Request.Temperature is not sent: the Messages API version parley speaks
// (see apiVersion) has no temperature parameter.
func params(req llm.Request) (*messagesRequest, error) {
	if req.Model == "" {
		return nil, errors.New("request has no model")
	}
	p := &messagesRequest{Model: req.Model, MaxTokens: DefaultMaxTokens, Stream: true}
	if req.MaxTokens > 0 {
		p.MaxTokens = req.MaxTokens
	}
	if budget := llm.ThinkingBudget(req.ReasoningEffort); budget > 0 {
		// The budget counts within max_tokens, which must exceed it.
		p.Thinking = &thinkingParam{Type: "enabled", BudgetTokens: budget}
		if p.MaxTokens <= budget {
			p.MaxTokens = budget + DefaultMaxTokens
		}
	}
	if req.System != "" {
		p.System = append(p.System, block{Type: "text", Text: req.System, CacheControl: ephemeral})
	}
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem && m.Content != "" {
			p.System = append(p.System, block{Type: "text", Text: m.Content})
		}
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return nil, err
	}
	if n := len(msgs); n > 0 {
		last := msgs[n-1].Content
		if b := &last[len(last)-1]; cacheable(b) {
			b.CacheControl = ephemeral
		}
	}
	p.Messages = msgs
	for _, t := range req.Tools {
		schema, err := inputSchema(t)
		if err != nil {
			return nil, err
		}
		p.Tools = append(p.Tools, toolParam{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return p, nil
}

// cacheable reports whether a block may carry cache_control: thinking
// blocks may not.
func cacheable(b *block) bool {
	return b.Type != "thinking" && b.Type != "redacted_thinking"
}

// messages converts the history. Consecutive messages of one role become
// one turn, so a run of tool results (and any user text after them) is a
// single user message, as Anthropic requires. Empty messages are dropped:
// Anthropic rejects empty content.
func messages(in []llm.Message) ([]message, error) {
	var out []message
	add := func(role string, blocks []block) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	for i, m := range in {
		var blocks []block
		switch m.Role {
		case llm.RoleSystem:
			continue // sent as system blocks
		case llm.RoleUser:
			if m.Content != "" {
				blocks = append(blocks, block{Type: "text", Text: m.Content})
			}
			for _, img := range m.Images {
				blocks = append(blocks, image(img))
			}
			add("user", blocks)
		case llm.RoleAssistant:
			// Thinking blocks come first, unchanged, as the API requires
			// when the turn goes on with tool results.
			for _, th := range m.Thinking {
				blocks = append(blocks, thinking(th))
			}
			if m.Content != "" {
				blocks = append(blocks, block{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
			}
			if len(blocks) == len(m.Thinking) {
				blocks = nil // thinking alone is not a message
			}
			add("assistant", blocks)
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool result has no tool call id", i)
			}
			add("user", []block{toolResult(m)})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

func thinking(th llm.Thinking) block {
	if th.Redacted != "" {
		return block{Type: "redacted_thinking", Data: th.Redacted}
	}
	text, sig := th.Text, th.Signature
	return block{Type: "thinking", Thinking: &text, Signature: &sig}
}

func toolResult(m llm.Message) block {
	r := block{Type: "tool_result", ToolUseID: m.ToolCallID}
	if m.Content != "" { // an empty text block is rejected; no content is not
		r.Content = append(r.Content, block{Type: "text", Text: m.Content})
	}
	for _, img := range m.Images {
		r.Content = append(r.Content, image(img))
	}
	return r
}

func image(img llm.Image) block {
	return block{Type: "image", Source: &imageSource{Type: "base64", MediaType: img.MediaType, Data: base64.StdEncoding.EncodeToString(img.Data)}}
}

// toolInput is the call's arguments as JSON. Arguments that are not a JSON
// object (a call cut off, or history from another provider) would make every
// later request in the session fail, so they are sent as {}.
func toolInput(args json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if len(args) == 0 || json.Unmarshal(args, &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return args
}

// inputSchema is the tool's JSON Schema as Anthropic wants it: an object
// schema with properties, every other keyword kept.
func inputSchema(t llm.Tool) (json.RawMessage, error) {
	schema := map[string]json.RawMessage{}
	if len(t.Schema) > 0 {
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return nil, fmt.Errorf("tool %s: schema: %w", t.Name, err)
		}
		if schema == nil {
			schema = map[string]json.RawMessage{}
		}
	}
	schema["type"] = json.RawMessage(`"object"`)
	if p, ok := schema["properties"]; !ok || string(p) == "null" {
		schema["properties"] = json.RawMessage(`{}`)
	}
	return json.Marshal(schema)
}
