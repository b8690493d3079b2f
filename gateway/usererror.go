package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
)

// A failure's whole text (hosts, ports, SQLSTATEs, session ids, a
// provider's error body) goes to the log only. A chat user, who may be a
// stranger in a group, is told in plain words, with a reference id the
// operator finds in the log, and /status names the last failure by it.

// Failure is a failure a chat was told of.
type Failure struct {
	Ref string    // the reference id the user was given; the log has it as "ref"
	At  time.Time // when it happened
	// What says in plain words what went wrong, without internals, e.g.
	// "the model provider rejected parley's key".
	What string
}

// failureKind sorts a failure into what a user can be told of it.
type failureKind int

const (
	failureInternal failureKind = iota
	// failureNotConfigured: no provider key, or the provider refused it.
	failureNotConfigured
	// failureProvider: the provider is down, overloaded or unreachable.
	failureProvider
	// failureStorage: parley's own database could not be reached.
	failureStorage
)

func kindOf(err error) failureKind {
	if errors.Is(err, llm.ErrNotConfigured) {
		return failureNotConfigured
	}
	if dbutil.Unavailable(err) {
		return failureStorage
	}
	var se *llm.StatusError
	if errors.As(err, &se) {
		switch {
		case se.StatusCode == http.StatusUnauthorized || se.StatusCode == http.StatusForbidden:
			return failureNotConfigured
		case se.StatusCode == http.StatusTooManyRequests || se.StatusCode >= 500:
			return failureProvider
		}
		return failureInternal
	}
	if llm.Retryable(err) {
		return failureProvider // a transport error: unreachable, reset, cut short
	}
	return failureInternal
}

// what is a failure's kind in plain words, for /status.
func (k failureKind) what() string {
	switch k {
	case failureNotConfigured:
		return "the assistant's model provider has no key for parley, or refused it"
	case failureProvider:
		return "the model provider was unreachable or overloaded"
	case failureStorage:
		return "parley's database was unavailable"
	}
	return "an internal error"
}

// newRef is a short, random reference id: 8 hex digits, enough to find
// one failure in a log.
func newRef() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// failed logs err under a new reference id (msg is the log's fixed
// message, attrs its context), remembers it as the key's last failure for
// /status, and returns the ref and what the chat is told: apology, then
// the ref and what to do. A missing or refused provider key says the
// assistant isn't configured, whatever the apology.
func (g *Gateway) failed(ctx context.Context, key sessions.Key, msg string, err error, apology string, attrs ...any) (ref, text string) {
	// A refusal the runner gives in words for the person (a spend cap
	// reached) is said as it is, and logged at info: nothing failed.
	var said interface{ UserMessage() string }
	if errors.As(err, &said) {
		g.opts.Log.InfoContext(ctx, "turn refused", append([]any{"session_key", key.String(), "reason", err}, attrs...)...)
		return "", said.UserMessage()
	}
	// Cut short on purpose (/stop, or a /reset that interrupts a
	// /compact): nothing failed, and the person asked for it.
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		g.opts.Log.InfoContext(ctx, msg+": stopped", append([]any{"session_key", key.String()}, attrs...)...)
		return "", "Stopped."
	}
	ref = newRef()
	kind := kindOf(err)
	g.opts.Log.ErrorContext(ctx, msg, append([]any{"ref", ref, "session_key", key.String(), "error", err}, attrs...)...)
	g.failures.remember(laneKey(key), Failure{Ref: ref, At: time.Now(), What: kind.what()})
	switch kind {
	case failureNotConfigured:
		return ref, fmt.Sprintf("The assistant isn't configured correctly (ref %s); the operator has been told.", ref)
	case failureProvider:
		return ref, fmt.Sprintf("%s (ref %s): the assistant's model can't be reached right now; please try again in a few minutes.", apology, ref)
	case failureStorage:
		return ref, fmt.Sprintf("%s (ref %s): my storage is unavailable right now; please try again in a few minutes.", apology, ref)
	}
	return ref, fmt.Sprintf("%s (ref %s); please try again shortly.", apology, ref)
}

// LastFailure is the last failure a session's chat was told of, if any
// since the process started.
func (g *Gateway) LastFailure(key sessions.Key) (Failure, bool) {
	return g.failures.last(laneKey(key))
}

// statusFailureLine is /status's line on the session's last failure: its
// reference id and kind, never its text (a group's members all read it).
func (g *Gateway) statusFailureLine(key sessions.Key) string {
	f, ok := g.LastFailure(key)
	if !ok {
		return ""
	}
	return fmt.Sprintf("\nLast error: ref %s at %s UTC, %s; the log has the detail under that ref.",
		f.Ref, f.At.UTC().Format("2006-01-02 15:04:05"), f.What)
}

// maxFailures bounds the failures remembered for /status: past it, an
// arbitrary older one is forgotten (the log keeps them all).
const maxFailures = 1024

// failures is each session key's last failure.
type failures struct {
	mu sync.Mutex
	m  map[string]Failure
}

func (f *failures) remember(key string, fl Failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]Failure{}
	}
	if _, ok := f.m[key]; !ok && len(f.m) >= maxFailures {
		for k := range f.m {
			delete(f.m, k)
			break
		}
	}
	f.m[key] = fl
}

func (f *failures) last(key string) (Failure, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.m[key]
	return fl, ok
}
