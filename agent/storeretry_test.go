package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
)

// A model stream cut short (an unexpected EOF, a reset mid-body) fails the
// turn once the provider's retries are spent: it is not taken for a
// database outage and tried again for ever.
func TestModelStreamCutIsNotADatabaseOutage(t *testing.T) {
	cut := fmt.Errorf("openai: read body: %w", io.ErrUnexpectedEOF)
	reset := fmt.Errorf("openai: %w", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")})
	model := echo.New()
	for range 10 {
		model.ThenError(cut).ThenError(reset)
	}
	e := newEnv(t, model, func(o *Options) {
		o.Retry = llm.RetryPolicy{MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }}
		o.StoreRetry = time.Millisecond
	})
	sess := e.cliSession()
	start := time.Now()
	_, err := e.run(Request{Session: sess, Inputs: []Input{{Text: "hi"}}})
	if err == nil || time.Since(start) > 9*time.Second {
		t.Fatalf("Run = %v after %s; want the model's failure, not a wait for the database", err, time.Since(start))
	}
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times; want the provider's 2 attempts, no more", n)
	}
	if st := e.runner.Status(sess.ID); st.State != StateError {
		t.Fatalf("status %+v; want error", st)
	}
}
