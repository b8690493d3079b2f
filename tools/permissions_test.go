package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
)

// Every call passes the permission check at the one door: a denied call
// never runs and its result says why; an asked call runs only when the
// person allows it; a call whose turn stops while it waits is aborted; a
// call with invalid arguments is refused before anyone is asked.
func TestCallChecksPermissions(t *testing.T) {
	var ran atomic.Int32
	run := func(context.Context, Call) (string, error) { ran.Add(1); return "done", nil }
	r := NewRegistry()
	for _, n := range []string{"gh__list", "gh__delete", "memory_search"} {
		if err := r.Register(Tool{Name: n, Run: run, Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`)}); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := permissions.NewPolicy(map[string][]permissions.Rule{"a": {{Tool: "gh__delete", Decision: permissions.Deny}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.SetPermissions(permissions.NewChecker(permissions.Options{Policy: pol}))
	var asked atomic.Int32
	answer := func(a permissions.Answer) permissions.Origin {
		return permissions.Origin{User: "telegram:1", Ask: func(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
			asked.Add(1)
			if q.Tool != "gh__list" || q.AgentID != "a" || q.SessionID != "s1" || q.User != "telegram:1" {
				t.Errorf("question %+v", q)
			}
			return a, nil
		}}
	}
	call := func(ctx context.Context, name, args string, o permissions.Origin) Result {
		return r.Call(ctx, Call{Name: name, SessionID: "s1", Key: sessions.Key{AgentID: "a"}, Arguments: json.RawMessage(args), Origin: o})
	}

	if res := call(context.Background(), "memory_search", `{}`, permissions.Origin{}); res.IsError || res.Content != "done" {
		t.Fatalf("own tool: %+v", res)
	}
	res := call(context.Background(), "gh__delete", `{}`, answer(permissions.AllowOnce))
	var de *permissions.DeniedError
	if !res.IsError || !errors.As(res.Err, &de) || !strings.HasPrefix(res.Content, "error: permission denied: gh__delete") {
		t.Fatalf("denied by the manifest: %+v", res)
	}
	if res := call(context.Background(), "gh__list", `{}`, answer(permissions.Refuse)); !res.IsError || !errors.Is(res.Err, permissions.ErrDenied) {
		t.Fatalf("the person said no: %+v", res)
	}
	if res := call(context.Background(), "gh__list", `{}`, answer(permissions.AllowOnce)); res.IsError || res.Content != "done" {
		t.Fatalf("the person said yes: %+v", res)
	}
	if res := call(context.Background(), "gh__list", `{"x":1}`, answer(permissions.AllowOnce)); !errors.Is(res.Err, ErrInvalidArguments) {
		t.Fatalf("invalid arguments: %+v", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res = call(ctx, "gh__list", `{}`, permissions.Origin{Ask: func(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
		cancel()
		<-ctx.Done()
		return "", ctx.Err()
	}})
	if !errors.Is(res.Err, ErrAborted) || res.Content != "aborted" {
		t.Fatalf("stopped while asking: %+v", res)
	}
	if ran.Load() != 2 || asked.Load() != 2 {
		t.Fatalf("ran %d calls (want 2), asked %d times (want 2: a denied tool and invalid arguments ask nobody)", ran.Load(), asked.Load())
	}
}

// BenchmarkCallPermissions is what the permission check adds to a call
// at the door: a zero-work tool called without a checker, and with one
// whose config allows it (no database read; see permissions'
// BenchmarkCheck for the paths that read stored answers).
func BenchmarkCallPermissions(b *testing.B) {
	for _, withChecker := range []bool{false, true} {
		name := "no checker"
		if withChecker {
			name = "checker"
		}
		b.Run(name, func(b *testing.B) {
			r := NewRegistry()
			if err := r.Register(Tool{Name: "noop", Run: func(context.Context, Call) (string, error) { return "", nil }}); err != nil {
				b.Fatal(err)
			}
			if withChecker {
				pol, err := permissions.NewPolicy(map[string][]permissions.Rule{"a": {{Tool: "gh__*", Decision: permissions.Ask}}}, nil)
				if err != nil {
					b.Fatal(err)
				}
				r.SetPermissions(permissions.NewChecker(permissions.Options{Policy: pol}))
			}
			c := Call{Name: "noop", SessionID: "s1", Key: sessions.Key{AgentID: "a"}, Arguments: json.RawMessage(`{}`)}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := r.Call(ctx, c); res.IsError {
					b.Fatal(res.Content)
				}
			}
		})
	}
}
