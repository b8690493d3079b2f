package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/wire"
)

const provider = "anthropic"

// statusOverloaded is Anthropic's "overloaded" status.
const statusOverloaded = 529

// apiError is the "error" object of an error response or error event.
type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// statusError reads an HTTP error response:
// {"type":"error","error":{"type":…,"message":…},"request_id":…}. A body
// in another shape (a proxy's HTML page) is kept as a short snippet.
func (m *Model) statusError(res *http.Response) error {
	return classify(wire.StatusError(provider, res, m.apiKey, func(raw []byte) (code, message string, ok bool) {
		var body struct {
			Error *apiError `json:"error"`
		}
		if json.Unmarshal(raw, &body) != nil || body.Error == nil {
			return "", "", false
		}
		return body.Error.Type, body.Error.Message, true
	}))
}

// eventError reads an error event sent mid-stream, which arrives on a 200
// response, so the status comes from its type (overloaded_error is 529).
func (m *Model) eventError(e *apiError) error {
	se := &llm.StatusError{Provider: provider, StatusCode: http.StatusInternalServerError, Message: "error event without details"}
	if e != nil {
		se.Code = e.Type
		se.StatusCode = statusForType(e.Type)
		if e.Message != "" {
			se.Message = wire.Redact(e.Message, m.apiKey)
		}
	}
	return classify(se)
}

func statusForType(t string) int {
	switch t {
	case "overloaded_error":
		return statusOverloaded
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "invalid_request_error":
		return http.StatusBadRequest
	case "timeout_error":
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// classify wraps llm.ErrContextLength around Anthropic's "prompt is too
// long: N tokens > M maximum" and "input length and `max_tokens` exceed
// context limit".
func classify(se *llm.StatusError) error {
	if se.StatusCode != http.StatusBadRequest || se.Code != "invalid_request_error" {
		return se
	}
	msg := strings.ToLower(se.Message)
	if strings.Contains(msg, "prompt is too long") ||
		strings.Contains(msg, "exceed context limit") ||
		strings.Contains(msg, "context window") {
		return fmt.Errorf("%w: %w", llm.ErrContextLength, se)
	}
	return se
}

// snippet is a body that is not Anthropic's JSON, shortened and with the
// API key redacted.
func (m *Model) snippet(raw []byte) string {
	return wire.Redact(wire.Snippet(raw), m.apiKey)
}
