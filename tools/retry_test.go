package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A call that fails in a class its policy names is tried again, up to the
// attempts, with each failed try told and kept; other failures are final.
func TestRetryPolicy(t *testing.T) {
	unavailable := ClassError(ClassUnavailable, errors.New("the server broke off"))
	for _, tc := range []struct {
		name     string
		retry    *Retry
		fails    []error // what the tries return before it answers
		want     string  // the result's content
		attempts int     // failed tries kept
	}{
		{"answers on the third try", &Retry{Attempts: 3, On: Classes}, []error{unavailable, unavailable}, "done", 2},
		{"out of tries", &Retry{Attempts: 2, On: Classes}, []error{unavailable, unavailable, unavailable}, "error: the server broke off", 1},
		{"no policy", nil, []error{unavailable}, "error: the server broke off", 0},
		{"a class the policy leaves out", &Retry{Attempts: 3, On: []string{ClassTimeout}}, []error{unavailable}, "error: the server broke off", 0},
		{"the tool's own error", &Retry{Attempts: 3, On: Classes}, []error{errors.New("the disk is full")}, "error: the disk is full", 0},
		{"a timeout", &Retry{Attempts: 2, On: []string{ClassTimeout}}, []error{fmt.Errorf("slow: %w", context.DeadlineExceeded)}, "done", 1},
		{"a refused connection", &Retry{Attempts: 2, On: []string{ClassUnavailable}}, []error{fmt.Errorf("dial: %w", syscall.ECONNREFUSED)}, "done", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			tries := 0
			if err := r.Register(Tool{Name: "flaky", Retry: tc.retry, Run: func(context.Context, Call) (string, error) {
				tries++
				if tries <= len(tc.fails) {
					return "", tc.fails[tries-1]
				}
				return "done", nil
			}}); err != nil {
				t.Fatal(err)
			}
			var told []Attempt
			res := r.Call(context.Background(), Call{Name: "flaky", Arguments: []byte(`{}`),
				Retrying: func(a Attempt, _ time.Duration) { told = append(told, a) }})
			if res.Content != tc.want || len(res.Attempts) != tc.attempts || len(told) != tc.attempts {
				t.Fatalf("%+v after %d tries (told of %d), want %q with %d failed tries kept", res, tries, len(told), tc.want, tc.attempts)
			}
			for i, a := range res.Attempts {
				if a.N != i+1 || a.Class == "" || a.Error == "" {
					t.Fatalf("attempt %d: %+v", i, a)
				}
			}
		})
	}
}

// The wait doubles from the backoff, and is no shorter than what the
// failure says (RetryAfter); a turn that ends during it ends the call.
func TestRetryWaits(t *testing.T) {
	r := &Retry{Attempts: 4, Backoff: 100 * time.Millisecond, On: Classes}
	broke := ClassError(ClassUnavailable, io.ErrUnexpectedEOF)
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond} {
		if _, wait, ok := r.retries(n, broke); !ok || wait != want {
			t.Fatalf("after try %d: wait %s (%v), want %s", n, wait, ok, want)
		}
	}
	if _, _, ok := r.retries(4, broke); ok {
		t.Fatal("a fifth try of four")
	}
	later := ClassError(ClassUnavailable, afterErr{time.Second})
	if _, wait, _ := r.retries(1, later); wait != time.Second {
		t.Fatalf("a failure that says a second: wait %s", wait)
	}

	reg := NewRegistry()
	if err := reg.Register(Tool{Name: "down", Retry: &Retry{Attempts: 3, Backoff: time.Hour, On: Classes},
		Run: func(context.Context, Call) (string, error) { return "", broke }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := reg.Call(ctx, Call{Name: "down", Arguments: []byte(`{}`), Retrying: func(Attempt, time.Duration) { cancel() }})
	if !res.IsError || !errors.Is(res.Err, ErrAborted) || !strings.Contains(res.Content, "aborted") || len(res.Attempts) != 1 {
		t.Fatalf("a call whose turn ended while it waited: %+v", res)
	}
}

type afterErr struct{ d time.Duration }

func (e afterErr) Error() string             { return "later" }
func (e afterErr) RetryAfter() time.Duration { return e.d }
