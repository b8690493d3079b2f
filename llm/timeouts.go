package llm

import (
	"context"
	"fmt"
	"time"
)

// Timeouts bound one model call (one attempt: each retry gets them anew).
// A zero field means the default (DefaultTimeouts) where a provider is set
// up, and "no override" in an agent's own (WithCallTimeouts).
type Timeouts struct {
	// Connect bounds reaching the provider: the TCP connection and the
	// TLS handshake.
	Connect time.Duration
	// FirstByte bounds the wait, once connected, for the first byte of the
	// response's body (the headers and the first chunk).
	FirstByte time.Duration
	// Idle bounds the silence between two reads of the stream.
	Idle time.Duration
	// Total bounds the whole call, from the request to the stream's end.
	Total time.Duration
}

// DefaultTimeouts suit a hosted API and a slow local model alike: a host
// that is up connects within seconds; a local model may read a long prompt
// for a minute or two before its first token; a stream quiet for two
// minutes has stalled; and ten minutes hold 4,096 output tokens at about
// seven a second.
var DefaultTimeouts = Timeouts{
	Connect:   10 * time.Second,
	FirstByte: 2 * time.Minute,
	Idle:      2 * time.Minute,
	Total:     10 * time.Minute,
}

// Or is t with each zero field taken from d.
func (t Timeouts) Or(d Timeouts) Timeouts {
	return Timeouts{
		Connect:   orDuration(t.Connect, d.Connect),
		FirstByte: orDuration(t.FirstByte, d.FirstByte),
		Idle:      orDuration(t.Idle, d.Idle),
		Total:     orDuration(t.Total, d.Total),
	}
}

func orDuration(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

type callTimeoutsKey struct{}

// WithCallTimeouts returns ctx carrying t, which override, field by field,
// the provider's timeouts for the calls made with it (an agent's own
// timeouts). Zero fields leave the provider's.
func WithCallTimeouts(ctx context.Context, t Timeouts) context.Context {
	if t == (Timeouts{}) {
		return ctx
	}
	return context.WithValue(ctx, callTimeoutsKey{}, t)
}

// CallTimeouts is what WithCallTimeouts put in ctx, or zero.
func CallTimeouts(ctx context.Context) Timeouts {
	t, _ := ctx.Value(callTimeoutsKey{}).(Timeouts)
	return t
}

// TimeoutPhase names the deadline a call passed.
type TimeoutPhase string

const (
	PhaseConnect   TimeoutPhase = "connect"
	PhaseFirstByte TimeoutPhase = "first_byte"
	PhaseIdle      TimeoutPhase = "idle"
	PhaseTotal     TimeoutPhase = "total"
)

// TimeoutError is a model call that passed one of its deadlines. It is
// transient: [Retryable] says yes, and the agent's fallbacks take it.
type TimeoutError struct {
	Provider string
	Phase    TimeoutPhase
	After    time.Duration
}

func (e *TimeoutError) Error() string {
	var what string
	switch e.Phase {
	case PhaseConnect:
		what = "no connection to the provider within %s"
	case PhaseFirstByte:
		what = "no answer from the provider within %s of the request"
	case PhaseIdle:
		what = "the stream stopped for %s"
	default:
		what = "the call took longer than %s"
	}
	// The provider's name is on the error that wraps this one.
	return fmt.Sprintf(what+" (timeouts.%s; raise it in the provider's or the agent's timeouts for a slow model)", e.After, e.Phase)
}

// Timeout reports true, as a net.Error's does.
func (e *TimeoutError) Timeout() bool { return true }

// Wait says, in plain words for a chat user, which wait ran out.
func (e *TimeoutError) Wait() string {
	switch e.Phase {
	case PhaseConnect:
		return fmt.Sprintf("couldn't connect within %s", e.After)
	case PhaseFirstByte:
		return fmt.Sprintf("didn't start answering within %s", e.After)
	case PhaseIdle:
		return fmt.Sprintf("stopped answering for %s", e.After)
	}
	return fmt.Sprintf("took longer than %s", e.After)
}
