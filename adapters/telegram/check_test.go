package telegram

import (
	"errors"
	"fmt"
	"testing"

	"github.com/parleyd/parley/adapters"
)

// A refusal no retry changes is undeliverable; others are not.
func TestUndeliverableRefusals(t *testing.T) {
	for _, tc := range []struct {
		err  *APIError
		want bool
	}{
		{&APIError{Method: "sendMessage", Code: 403, Description: "Forbidden: bot was blocked by the user"}, true},
		{&APIError{Method: "sendMessage", Code: 400, Description: "Bad Request: chat not found"}, true},
		{&APIError{Method: "sendMessage", Code: 400, Description: "Bad Request: can't parse entities"}, false},
		{&APIError{Method: "sendMessage", Code: 502, Description: "Bad Gateway"}, false},
	} {
		if got := errors.Is(fmt.Errorf("send: %w", tc.err), adapters.ErrUndeliverable); got != tc.want {
			t.Errorf("%v: undeliverable %v, want %v", tc.err, got, tc.want)
		}
	}
}
