package anthropic

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/wire"
)

const provider = "anthropic"

// statusOverloaded is Anthropic's "overloaded" status.
const statusOverloaded = 529

// mapError turns an SDK error into a *llm.StatusError (wrapped with
// llm.ErrContextLength when the prompt is too long), or wraps a transport
// error as it is. The SDK's own error text (which holds the request URL and
// raw body) is not kept.
func (m *Model) mapError(err error) error {
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("%s: %w", provider, err)
	}
	se := &llm.StatusError{
		Provider:   provider,
		StatusCode: apiErr.StatusCode,
		Code:       string(apiErr.Type()),
		Message:    wire.Redact(apiErr.Message, m.apiKey),
	}
	if apiErr.Response != nil {
		se.RetryAfter = wire.RetryAfter(apiErr.Response.Header, time.Now())
	}
	if se.StatusCode < 400 {
		// An error event mid-stream arrives on a 200 response.
		se.StatusCode = statusForType(se.Code)
	}
	if isContextLength(se) {
		return fmt.Errorf("%w: %w", llm.ErrContextLength, se)
	}
	return se
}

func statusForType(t string) int {
	switch anthropic.ErrorType(t) {
	case anthropic.ErrorTypeOverloadedError:
		return statusOverloaded
	case anthropic.ErrorTypeRateLimitError:
		return http.StatusTooManyRequests
	case anthropic.ErrorTypeInvalidRequestError:
		return http.StatusBadRequest
	case anthropic.ErrorTypeTimeoutError:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// isContextLength matches Anthropic's "prompt is too long: N tokens > M
// maximum" and "input length and `max_tokens` exceed context limit".
func isContextLength(se *llm.StatusError) bool {
	if se.StatusCode != http.StatusBadRequest || se.Code != string(anthropic.ErrorTypeInvalidRequestError) {
		return false
	}
	msg := strings.ToLower(se.Message)
	return strings.Contains(msg, "prompt is too long") ||
		strings.Contains(msg, "exceed context limit") ||
		strings.Contains(msg, "context window")
}
