package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/wire"
)

const provider = "openai"

// errorBody is the error shapes servers send, read leniently:
//   - OpenAI (and OpenRouter): {"error":{"message","type","param","code"}},
//     where code is a string, a number (OpenRouter) or null;
//   - Ollama and LM Studio: {"error":"text"};
//   - vLLM: {"object":"error","message","type","code"} at the top level.
type errorBody struct {
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

type errorDetail struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// parseError reads an error body (the whole body, or the "error" value of a
// stream chunk when inner is set). ok is false when it is none of the
// known shapes.
func parseError(raw []byte, inner bool) (d errorDetail, ok bool) {
	if inner {
		return parseErrorValue(raw)
	}
	var b errorBody
	if json.Unmarshal(raw, &b) != nil {
		return d, false
	}
	if len(b.Error) > 0 && string(b.Error) != "null" {
		return parseErrorValue(b.Error)
	}
	if b.Message != "" {
		return errorDetail{Message: b.Message, Type: b.Type, Code: b.Code}, true
	}
	return d, false
}

func parseErrorValue(raw json.RawMessage) (d errorDetail, ok bool) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return errorDetail{Message: text}, true
	}
	if json.Unmarshal(raw, &d) != nil {
		return d, false
	}
	return d, true
}

// code is the error's code as text: a JSON string's value, or a number as
// written; "" for null or none.
func (d errorDetail) code() string {
	var s string
	if json.Unmarshal(d.Code, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(d.Code, &n) == nil {
		return n.String()
	}
	return ""
}

// statusError reads an HTTP error response.
func (m *Model) statusError(res *http.Response) error {
	return classify(wire.StatusError(provider, res, m.apiKey, func(raw []byte) (code, message string, ok bool) {
		d, ok := parseError(raw, false)
		if !ok {
			return "", "", false
		}
		code = d.code()
		if _, numeric := strconv.Atoi(code); numeric == nil {
			code = "" // a number repeating the HTTP status says nothing more
		}
		return firstNonEmpty(code, d.Type), d.Message, true
	}))
}

// streamStatusError reads an error sent mid-stream, which arrives with
// HTTP 200, so the status is inferred from its code and type.
func (m *Model) streamStatusError(raw json.RawMessage) *llm.StatusError {
	se := &llm.StatusError{Provider: provider, StatusCode: http.StatusInternalServerError}
	d, ok := parseError(raw, true)
	if !ok {
		se.Message = m.snippet(raw)
		return se
	}
	code := d.code()
	se.Code = firstNonEmpty(code, d.Type)
	se.Message = wire.Redact(d.Message, m.apiKey)
	if n, err := strconv.Atoi(code); err == nil && n >= 400 && n < 600 {
		se.StatusCode = n // OpenRouter sends the HTTP status as the code
		se.Code = firstNonEmpty(d.Type, code)
		return se
	}
	switch kind := code + " " + d.Type; {
	case strings.Contains(kind, "rate_limit"):
		se.StatusCode = http.StatusTooManyRequests
	case strings.Contains(kind, "context_length"), strings.Contains(kind, "invalid_request"):
		se.StatusCode = http.StatusBadRequest
	}
	return se
}

// snippet is a body that is not the provider's JSON, shortened and with the
// API key redacted.
func (m *Model) snippet(raw []byte) string {
	return wire.Redact(wire.Snippet(raw), m.apiKey)
}

// classify wraps llm.ErrContextLength around context-length errors. Besides
// OpenAI's code, it knows the wording of OpenAI-compatible servers.
func classify(se *llm.StatusError) error {
	msg := strings.ToLower(se.Message)
	if se.Code == "context_length_exceeded" ||
		(se.StatusCode == http.StatusBadRequest &&
			(strings.Contains(msg, "maximum context length") || strings.Contains(msg, "context length") ||
				strings.Contains(msg, "context window"))) {
		return fmt.Errorf("%w: %w", llm.ErrContextLength, se)
	}
	return se
}

// refusedStreamOptions reports whether err is a server refusing the
// stream_options field (OpenAI itself accepts it).
func refusedStreamOptions(err error) bool {
	var se *llm.StatusError
	if !errors.As(err, &se) || (se.StatusCode != http.StatusBadRequest && se.StatusCode != http.StatusUnprocessableEntity) {
		return false
	}
	msg := strings.ToLower(se.Message)
	return strings.Contains(msg, "stream_options") || strings.Contains(msg, "include_usage")
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
