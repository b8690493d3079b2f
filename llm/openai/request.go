package openai

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parleyd/parley/llm"
)

// chatRequest is the body of POST /chat/completions: only the fields parley
// sends.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Tools               []chatTool     `json:"tools,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, a []contentPart, or nil (left out: an assistant
	// message with only tool calls).
	Content    any            `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type contentPart struct {
	Type     string    `json:"type"` // "text" or "image_url"
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string      `json:"type"` // "function"
	Function functionDef `json:"function"`
}

type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// emptySchema is sent for a tool without a schema: OpenAI wants an object
// schema, and some compatible servers reject a tool without parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// params turns a neutral request into a Chat Completions body.
func params(req llm.Request, includeUsage bool) (*chatRequest, error) {
	if req.Model == "" {
		return nil, errors.New("request has no model")
	}
	p := &chatRequest{Model: req.Model, Stream: true, Temperature: req.Temperature}
	if includeUsage {
		p.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if req.MaxTokens > 0 {
		p.MaxCompletionTokens = req.MaxTokens
	}
	if req.System != "" {
		p.Messages = append(p.Messages, chatMessage{Role: "system", Content: req.System})
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return nil, err
	}
	p.Messages = append(p.Messages, msgs...)
	for _, t := range req.Tools {
		schema := emptySchema
		if len(t.Schema) > 0 {
			if !json.Valid(t.Schema) {
				return nil, fmt.Errorf("tool %s: schema is not valid JSON", t.Name)
			}
			schema = t.Schema
		}
		p.Tools = append(p.Tools, chatTool{Type: "function", Function: functionDef{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	return p, nil
}

func messages(in []llm.Message) ([]chatMessage, error) {
	var (
		out []chatMessage
		// Chat Completions takes images only in user messages, and a user
		// message may not interrupt a run of tool results, so images that
		// tool results carry follow the run as one user message.
		toolImages []contentPart
	)
	for i, m := range in {
		switch m.Role {
		case llm.RoleSystem:
			out = append(out, chatMessage{Role: "system", Content: m.Content})
		case llm.RoleUser:
			if len(m.Images) == 0 {
				out = append(out, chatMessage{Role: "user", Content: m.Content})
				continue
			}
			var parts []contentPart
			if m.Content != "" {
				parts = append(parts, contentPart{Type: "text", Text: m.Content})
			}
			out = append(out, chatMessage{Role: "user", Content: append(parts, imageParts(m.Images)...)})
		case llm.RoleAssistant:
			out = append(out, assistant(m))
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool result has no tool call id", i)
			}
			out = append(out, chatMessage{Role: "tool", Content: m.Content, ToolCallID: m.ToolCallID})
			toolImages = append(toolImages, imageParts(m.Images)...)
			if len(toolImages) > 0 && (i+1 == len(in) || in[i+1].Role != llm.RoleTool) {
				parts := append([]contentPart{{Type: "text", Text: "Images from the tool results above:"}}, toolImages...)
				out = append(out, chatMessage{Role: "user", Content: parts})
				toolImages = nil
			}
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

func assistant(m llm.Message) chatMessage {
	a := chatMessage{Role: "assistant"}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		a.Content = m.Content
	}
	for _, tc := range m.ToolCalls {
		args := string(tc.Arguments)
		if args == "" {
			args = "{}"
		}
		a.ToolCalls = append(a.ToolCalls, chatToolCall{ID: tc.ID, Type: "function", Function: functionCall{Name: tc.Name, Arguments: args}})
	}
	return a
}

func imageParts(imgs []llm.Image) []contentPart {
	var parts []contentPart
	for _, img := range imgs {
		url := "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
		parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{URL: url}})
	}
	return parts
}
