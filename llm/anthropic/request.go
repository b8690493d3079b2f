package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/parleyd/parley/llm"
)

// DefaultMaxTokens is sent when the request sets none: Anthropic requires
// max_tokens.
const DefaultMaxTokens = 4096

// params turns a neutral request into Messages API parameters.
//
// The system prompt is one text block marked cache_control ephemeral, so
// the tools and system prompt are served from the prompt cache across turns.
// System messages inside the history (e.g. a compaction summary) follow it
// as further system blocks, outside the cached prefix.
//
// Request.Temperature is not sent: the Messages API version this SDK speaks
// (2026-10-21) has no temperature parameter.
func params(req llm.Request) (anthropic.MessageNewParams, error) {
	if req.Model == "" {
		return anthropic.MessageNewParams{}, errors.New("request has no model")
	}
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: DefaultMaxTokens,
	}
	if req.MaxTokens > 0 {
		p.MaxTokens = int64(req.MaxTokens)
	}
	if req.System != "" {
		p.System = append(p.System, anthropic.TextBlockParam{
			Text:         req.System,
			CacheControl: anthropic.NewCacheControlEphemeralParam(),
		})
	}
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem && m.Content != "" {
			p.System = append(p.System, anthropic.TextBlockParam{Text: m.Content})
		}
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return p, err
	}
	p.Messages = msgs
	for _, t := range req.Tools {
		tool, err := tool(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, tool)
	}
	return p, nil
}

// messages converts the history. Consecutive messages of one role become
// one turn, so a run of tool results (and any user text after them) is a
// single user message, as Anthropic requires. Empty messages are dropped:
// Anthropic rejects empty content.
func messages(in []llm.Message) ([]anthropic.MessageParam, error) {
	var out []anthropic.MessageParam
	add := func(role llm.Role, blocks []anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 {
			last := &out[n-1]
			if role == llm.RoleAssistant && last.OfAssistant != nil {
				last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
				return
			}
			if role == llm.RoleUser && last.OfUser != nil {
				last.OfUser.Content = append(last.OfUser.Content, blocks...)
				return
			}
		}
		if role == llm.RoleAssistant {
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		} else {
			out = append(out, anthropic.NewUserMessage(blocks...))
		}
	}
	for i, m := range in {
		var blocks []anthropic.ContentBlockParamUnion
		switch m.Role {
		case llm.RoleSystem:
			continue // sent as system blocks
		case llm.RoleUser:
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, img := range m.Images {
				blocks = append(blocks, image(img))
			}
			add(llm.RoleUser, blocks)
		case llm.RoleAssistant:
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, toolInput(tc.Arguments), tc.Name))
			}
			add(llm.RoleAssistant, blocks)
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool result has no tool call id", i)
			}
			add(llm.RoleUser, []anthropic.ContentBlockParamUnion{toolResult(m)})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

func toolResult(m llm.Message) anthropic.ContentBlockParamUnion {
	r := anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	if m.Content != "" { // an empty text block is rejected; no content is not
		r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{
			OfText: &anthropic.TextBlockParam{Text: m.Content},
		})
	}
	for _, img := range m.Images {
		r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: image(img).OfImage})
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &r}
}

func image(img llm.Image) anthropic.ContentBlockParamUnion {
	return anthropic.NewImageBlockBase64(img.MediaType, base64.StdEncoding.EncodeToString(img.Data))
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

func tool(t llm.Tool) (anthropic.ToolUnionParam, error) {
	var schema anthropic.ToolInputSchemaParam
	if len(t.Schema) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(t.Schema, &m); err != nil {
			return anthropic.ToolUnionParam{}, fmt.Errorf("tool %s: schema: %w", t.Name, err)
		}
		for k, v := range m {
			switch k {
			case "type": // always "object"
			case "properties":
				schema.Properties = v
			case "required":
				if err := json.Unmarshal(v, &schema.Required); err != nil {
					return anthropic.ToolUnionParam{}, fmt.Errorf("tool %s: schema required: %w", t.Name, err)
				}
			default:
				if schema.ExtraFields == nil {
					schema.ExtraFields = map[string]any{}
				}
				schema.ExtraFields[k] = v
			}
		}
	}
	if schema.Properties == nil {
		schema.Properties = map[string]any{}
	}
	tp := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
	if t.Description != "" {
		tp.Description = anthropic.String(t.Description)
	}
	return anthropic.ToolUnionParam{OfTool: &tp}, nil
}
