package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/wire"
)

const provider = "openai"

// mapError turns an SDK error into a *llm.StatusError (wrapped with
// llm.ErrContextLength when the prompt is too long), or wraps a transport
// error as it is.
func (m *Model) mapError(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		se := &llm.StatusError{
			Provider:   provider,
			StatusCode: apiErr.StatusCode,
			Code:       firstNonEmpty(apiErr.Code, apiErr.Type),
			Message:    wire.Redact(apiErr.Message, m.apiKey),
		}
		if apiErr.Response != nil {
			se.RetryAfter = wire.RetryAfter(apiErr.Response.Header, time.Now())
		}
		return classify(se)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return classify(m.streamStatusError(streamErr))
	}
	return fmt.Errorf("%s: %w", provider, err)
}

// streamStatusError reads an error event sent mid-stream, which arrives with
// HTTP 200, so the status is inferred from its code and type.
func (m *Model) streamStatusError(e *ssestream.StreamError) *llm.StatusError {
	var body struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	se := &llm.StatusError{Provider: provider, StatusCode: http.StatusInternalServerError}
	if json.Unmarshal(e.Event.Data, &body) != nil {
		se.Message = wire.Redact(e.Message, m.apiKey)
		return se
	}
	var code string
	_ = json.Unmarshal(body.Error.Code, &code) // code may be a number or null
	se.Code = firstNonEmpty(code, body.Error.Type)
	se.Message = wire.Redact(body.Error.Message, m.apiKey)
	switch kind := code + " " + body.Error.Type; {
	case strings.Contains(kind, "rate_limit"):
		se.StatusCode = http.StatusTooManyRequests
	case strings.Contains(kind, "context_length"), strings.Contains(kind, "invalid_request"):
		se.StatusCode = http.StatusBadRequest
	}
	return se
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

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// normalizeErrorBody is SDK middleware for OpenAI-compatible servers whose
// error bodies differ from OpenAI's {"error":{"message":...}}: Ollama sends
// {"error":"text"} (on which the SDK fails to build an *openai.Error at all)
// and vLLM sends {"message":...,"type":...} at the top level (leaving the
// message empty). Both are rewritten into OpenAI's shape.
func normalizeErrorBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 || res.Body == nil {
		return res, err
	}
	raw, readErr := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(raw))
	if readErr != nil {
		return res, nil // the SDK reports the status without a message
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(raw, &body) != nil {
		return res, nil
	}
	var fixed any
	if e, ok := body["error"]; ok {
		var text string
		if json.Unmarshal(e, &text) != nil {
			return res, nil // already OpenAI's shape
		}
		fixed = map[string]any{"error": map[string]any{"message": text}}
	} else if _, ok := body["message"]; ok {
		fixed = map[string]any{"error": body}
	} else {
		return res, nil
	}
	if b, err := json.Marshal(fixed); err == nil {
		res.Body = io.NopCloser(bytes.NewReader(b))
		res.ContentLength = int64(len(b))
	}
	return res, nil
}
