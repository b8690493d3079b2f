package openai

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/parleyd/parley/llm"
)

// params turns a neutral request into Chat Completions parameters.
func params(req llm.Request) (openai.ChatCompletionNewParams, error) {
	if req.Model == "" {
		return openai.ChatCompletionNewParams{}, errors.New("request has no model")
	}
	p := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(req.Model),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return p, err
	}
	p.Messages = append(p.Messages, msgs...)
	for _, t := range req.Tools {
		tool, err := tool(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, tool)
	}
	if req.Temperature != nil {
		p.Temperature = openai.Float(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
	}
	return p, nil
}

func messages(in []llm.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	var (
		out []openai.ChatCompletionMessageParamUnion
		// Chat Completions takes images only in user messages, and a user
		// message may not interrupt a run of tool results, so images that
		// tool results carry follow the run as one user message.
		toolImages []openai.ChatCompletionContentPartUnionParam
	)
	for i, m := range in {
		switch m.Role {
		case llm.RoleSystem:
			out = append(out, openai.SystemMessage(m.Content))
		case llm.RoleUser:
			if len(m.Images) == 0 {
				out = append(out, openai.UserMessage(m.Content))
				continue
			}
			var parts []openai.ChatCompletionContentPartUnionParam
			if m.Content != "" {
				parts = append(parts, openai.TextContentPart(m.Content))
			}
			out = append(out, openai.UserMessage(append(parts, imageParts(m.Images)...)))
		case llm.RoleAssistant:
			out = append(out, assistant(m))
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool result has no tool call id", i)
			}
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
			toolImages = append(toolImages, imageParts(m.Images)...)
			if len(toolImages) > 0 && (i+1 == len(in) || in[i+1].Role != llm.RoleTool) {
				parts := append([]openai.ChatCompletionContentPartUnionParam{
					openai.TextContentPart("Images from the tool results above:"),
				}, toolImages...)
				out = append(out, openai.UserMessage(parts))
				toolImages = nil
			}
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

func assistant(m llm.Message) openai.ChatCompletionMessageParamUnion {
	var a openai.ChatCompletionAssistantMessageParam
	if m.Content != "" || len(m.ToolCalls) == 0 {
		a.Content.OfString = openai.String(m.Content)
	}
	for _, tc := range m.ToolCalls {
		args := string(tc.Arguments)
		if args == "" {
			args = "{}"
		}
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: tc.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name:      tc.Name,
					Arguments: args,
				},
			},
		})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

func imageParts(imgs []llm.Image) []openai.ChatCompletionContentPartUnionParam {
	var parts []openai.ChatCompletionContentPartUnionParam
	for _, img := range imgs {
		url := "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
		parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
	}
	return parts
}

func tool(t llm.Tool) (openai.ChatCompletionToolUnionParam, error) {
	schema := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	if len(t.Schema) > 0 {
		schema = shared.FunctionParameters{}
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool %s: schema: %w", t.Name, err)
		}
	}
	def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
	if t.Description != "" {
		def.Description = openai.String(t.Description)
	}
	return openai.ChatCompletionFunctionTool(def), nil
}
