package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The kinds of failure a retry policy may retry.
const (
	// ClassTimeout: the tool, or what it called, took too long.
	ClassTimeout = "timeout"
	// ClassUnavailable: what the tool called could not be reached or
	// broke off (connection refused or reset, a 502, 503 or 504).
	ClassUnavailable = "unavailable"
	// ClassRateLimited: what the tool called said to slow down (a 429).
	ClassRateLimited = "rate_limited"
)

// Classes are the failure classes a retry policy may name.
var Classes = []string{ClassTimeout, ClassUnavailable, ClassRateLimited}

// Retry is a tool's retry policy: a call that fails in one of the classes
// On is tried again, up to Attempts tries in all, waiting Backoff before
// the second and twice as long before each after it. A failure of another
// class (bad arguments, a refusal, an error the tool reports) is final.
type Retry struct {
	Attempts int
	Backoff  time.Duration
	On       []string
}

// Classed is an error that says its failure class (Classes).
type Classed interface {
	FailureClass() string
}

// Classify is err's failure class, "" for none a retry applies to: the
// class an error in its chain says (Classed), else a timeout for a
// deadline or a network timeout, and unavailable for a refused, reset or
// broken-off connection.
func Classify(err error) string {
	if err == nil {
		return ""
	}
	var c Classed
	if errors.As(err, &c) {
		return c.FailureClass()
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ClassTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return ClassUnavailable
	}
	return ""
}

// ClassError marks err as of class.
func ClassError(class string, err error) error { return &classedError{class: class, err: err} }

type classedError struct {
	class string
	err   error
}

func (e *classedError) Error() string        { return e.err.Error() }
func (e *classedError) Unwrap() error        { return e.err }
func (e *classedError) FailureClass() string { return e.class }

// Attempt is one failed try of a call that was tried again.
type Attempt struct {
	// N counts tries from 1.
	N     int    `json:"n"`
	Class string `json:"class"`
	Error string `json:"error"`
}

// CheckRetry says what is wrong with a retry policy, "" when nothing is.
func CheckRetry(r Retry) string {
	switch {
	case r.Attempts < 1 || r.Attempts > 10:
		return fmt.Sprintf("attempts %d is out of range; use 1 (no retry) to 10 tries in all, such as 3", r.Attempts)
	case r.Backoff < 0 || r.Backoff > 5*time.Minute:
		return fmt.Sprintf("backoff %s is out of range; use 0 to 5m, such as 1s", r.Backoff)
	}
	for _, c := range r.On {
		if !slices.Contains(Classes, c) {
			return fmt.Sprintf("on: %q is not a failure class; use %s", c, strings.Join(Classes, ", "))
		}
	}
	return ""
}

// retries reports whether r tries a call again after its try n failed
// with err, and how long to wait first.
func (r *Retry) retries(n int, err error) (string, time.Duration, bool) {
	if r == nil || n >= r.Attempts {
		return "", 0, false
	}
	class := Classify(err)
	if class == "" || !slices.Contains(r.On, class) {
		return class, 0, false
	}
	wait := r.Backoff << (n - 1)
	// What the tool called may say when to come back (a server in its
	// own backoff, a Retry-After): no sooner than that.
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		wait = max(wait, ra.RetryAfter())
	}
	return class, wait, true
}
