package openai

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/wire"
)

// The request body is written by hand, field by field, rather than by
// encoding/json: each turn sends the whole history, and reflection over it
// cost more CPU than the rest of the provider call. The shape is
// OpenAI's Chat Completions request:
//
//	{"model", "stream": true, "stream_options": {"include_usage": true},
//	 "temperature", "max_completion_tokens", "messages": [...], "tools": [...]}

// emptySchema is sent for a tool without a schema: OpenAI wants an object
// schema, and some compatible servers reject a tool without parameters.
const emptySchema = `{"type":"object","properties":{}}`

// encodeRequest appends the JSON body for req to b.
func encodeRequest(b []byte, req llm.Request, includeUsage bool) ([]byte, error) {
	if req.Model == "" {
		return b, errors.New("request has no model")
	}
	b = append(b, `{"model":`...)
	b = wire.AppendJSONString(b, req.Model)
	b = append(b, `,"stream":true`...)
	if includeUsage {
		b = append(b, `,"stream_options":{"include_usage":true}`...)
	}
	if t := req.Temperature; t != nil {
		if math.IsNaN(*t) || math.IsInf(*t, 0) {
			return b, fmt.Errorf("temperature %v is not a number", *t)
		}
		b = append(b, `,"temperature":`...)
		b = strconv.AppendFloat(b, *t, 'g', -1, 64)
	}
	if req.MaxTokens > 0 {
		b = append(b, `,"max_completion_tokens":`...)
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	if req.ReasoningEffort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = wire.AppendJSONString(b, req.ReasoningEffort)
	}
	b = append(b, `,"messages":[`...)
	first := true
	if req.System != "" {
		b = appendTextMessage(b, "system", req.System)
		first = false
	}
	var err error
	if b, err = appendMessages(b, req.Messages, first); err != nil {
		return b, err
	}
	b = append(b, ']')
	for i, t := range req.Tools {
		if i == 0 {
			b = append(b, `,"tools":[`...)
		} else {
			b = append(b, ',')
		}
		schema := []byte(emptySchema)
		if len(t.Schema) > 0 {
			if !json.Valid(t.Schema) {
				return b, fmt.Errorf("tool %s: schema is not valid JSON", t.Name)
			}
			schema = t.Schema
		}
		b = append(b, `{"type":"function","function":{"name":`...)
		b = wire.AppendJSONString(b, t.Name)
		if t.Description != "" {
			b = append(b, `,"description":`...)
			b = wire.AppendJSONString(b, t.Description)
		}
		b = append(b, `,"parameters":`...)
		b = append(b, schema...)
		b = append(b, "}}"...)
		if i == len(req.Tools)-1 {
			b = append(b, ']')
		}
	}
	return append(b, '}', '\n'), nil
}

// sizeHint estimates the body's size, so it is allocated once.
func sizeHint(req llm.Request) int {
	n := 256 + len(req.System)
	for _, m := range req.Messages {
		n += 64 + len(m.Content)
		for _, img := range m.Images {
			n += 64 + base64.StdEncoding.EncodedLen(len(img.Data))
		}
		for _, tc := range m.ToolCalls {
			n += 96 + len(tc.Name) + len(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += 96 + len(t.Name) + len(t.Description) + len(t.Schema)
	}
	return n + n/8 // room for escapes
}

func appendTextMessage(b []byte, role, content string) []byte {
	b = append(b, `{"role":"`...)
	b = append(b, role...)
	b = append(b, `","content":`...)
	b = wire.AppendJSONString(b, content)
	return append(b, '}')
}

func appendMessages(b []byte, in []llm.Message, first bool) ([]byte, error) {
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	// Chat Completions takes images only in user messages, and a user
	// message may not interrupt a run of tool results, so images that tool
	// results carry follow the run as one user message.
	var toolImages []llm.Image
	for i, m := range in {
		switch m.Role {
		case llm.RoleSystem:
			sep()
			b = appendTextMessage(b, "system", m.Content)
		case llm.RoleUser:
			sep()
			if len(m.Images) == 0 {
				b = appendTextMessage(b, "user", m.Content)
				continue
			}
			b = append(b, `{"role":"user","content":[`...)
			if m.Content != "" {
				b = appendTextPart(b, m.Content)
				b = append(b, ',')
			}
			b = appendImageParts(b, m.Images)
			b = append(b, "]}"...)
		case llm.RoleAssistant:
			sep()
			b = appendAssistant(b, m)
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return b, fmt.Errorf("message %d: tool result has no tool call id", i)
			}
			sep()
			b = append(b, `{"role":"tool","content":`...)
			b = wire.AppendJSONString(b, m.Content)
			b = append(b, `,"tool_call_id":`...)
			b = wire.AppendJSONString(b, m.ToolCallID)
			b = append(b, '}')
			toolImages = append(toolImages, m.Images...)
			if len(toolImages) > 0 && (i+1 == len(in) || in[i+1].Role != llm.RoleTool) {
				sep()
				b = append(b, `{"role":"user","content":[`...)
				b = appendTextPart(b, "Images from the tool results above:")
				b = append(b, ',')
				b = appendImageParts(b, toolImages)
				b = append(b, "]}"...)
				toolImages = nil
			}
		default:
			return b, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return b, nil
}

// appendAssistant writes an assistant message; one with only tool calls has
// no content field.
func appendAssistant(b []byte, m llm.Message) []byte {
	b = append(b, `{"role":"assistant"`...)
	if m.Content != "" || len(m.ToolCalls) == 0 {
		b = append(b, `,"content":`...)
		b = wire.AppendJSONString(b, m.Content)
	}
	for i, tc := range m.ToolCalls {
		if i == 0 {
			b = append(b, `,"tool_calls":[`...)
		} else {
			b = append(b, ',')
		}
		args := string(tc.Arguments)
		if args == "" {
			args = "{}"
		}
		b = append(b, `{"id":`...)
		b = wire.AppendJSONString(b, tc.ID)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = wire.AppendJSONString(b, tc.Name)
		b = append(b, `,"arguments":`...)
		b = wire.AppendJSONString(b, args) // a string holding the JSON, as the API wants
		b = append(b, "}}"...)
		if i == len(m.ToolCalls)-1 {
			b = append(b, ']')
		}
	}
	return append(b, '}')
}

func appendTextPart(b []byte, text string) []byte {
	b = append(b, `{"type":"text","text":`...)
	b = wire.AppendJSONString(b, text)
	return append(b, '}')
}

func appendImageParts(b []byte, imgs []llm.Image) []byte {
	for i, img := range imgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"image_url","image_url":{"url":`...)
		b = wire.AppendJSONString(b, "data:"+img.MediaType+";base64,"+base64.StdEncoding.EncodeToString(img.Data))
		b = append(b, "}}"...)
	}
	return b
}
