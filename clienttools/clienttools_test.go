package clienttools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/clienttools"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

const locationSchema = `{"type": "object", "properties": {"accuracy": {"enum": ["city", "street"]}}, "required": ["accuracy"]}`

func TestValidate(t *testing.T) {
	ok := clienttools.Spec{Name: "get_location", Description: " Where the user is. ", InputSchema: json.RawMessage(" " + locationSchema)}
	specs, err := clienttools.Validate([]clienttools.Spec{ok, {Name: "ping", Description: "No arguments."}}, nil)
	if err != nil || specs[0].Description != "Where the user is." || string(specs[0].InputSchema) != strings.Join(strings.Fields(locationSchema), "") ||
		specs[1].InputSchema != nil {
		t.Fatalf("Validate = %+v, %v", specs, err)
	}
	taken := func(name string) bool { return name == "memory_write" }
	tests := []struct {
		name  string
		specs []clienttools.Spec
		want  string
	}{
		{"bad name", []clienttools.Spec{{Name: "get location", Description: "d"}}, `tools[0].name "get location" is not a tool name`},
		{"empty name", []clienttools.Spec{{Description: "d"}}, `tools[0].name "" is not a tool name`},
		{"twice", []clienttools.Spec{ok, ok}, `tools[1].name "get_location" is declared twice (also tools[0])`},
		{"taken", []clienttools.Spec{{Name: "memory_write", Description: "d"}}, `"memory_write" is the name of one of parley's tools`},
		{"no description", []clienttools.Spec{{Name: "a"}}, "tools[0].description is required"},
		{"long description", []clienttools.Spec{{Name: "a", Description: strings.Repeat("d", clienttools.MaxDescriptionChars+1)}}, "is 4097 characters; the limit is 4096"},
		{"schema not an object", []clienttools.Spec{{Name: "a", Description: "d", InputSchema: json.RawMessage(`[1]`)}}, "tools[0].input_schema must be a JSON Schema object"},
		{"schema of a string", []clienttools.Spec{{Name: "a", Description: "d", InputSchema: json.RawMessage(`{"type": "string"}`)}}, `must describe an object ("type": "object")`},
		{"schema without a type", []clienttools.Spec{{Name: "a", Description: "d", InputSchema: json.RawMessage(`{"properties": {}}`)}}, `must describe an object`},
		{"schema too big", []clienttools.Spec{{Name: "a", Description: "d", InputSchema: json.RawMessage(`{"type": "object", "description": "` + strings.Repeat("x", clienttools.MaxSchemaBytes) + `"}`)}}, "the limit is 32768"},
		{"too many", make([]clienttools.Spec, clienttools.MaxTools+1), "65 tools declared; a session may declare at most 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := clienttools.Validate(tc.specs, taken)
			if !errors.Is(err, clienttools.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
	// Every problem is named at once.
	_, err = clienttools.Validate([]clienttools.Spec{{Name: "a b"}, {Name: "c"}}, nil)
	if err == nil || strings.Count(err.Error(), "tools[") != 3 {
		t.Errorf("several problems: %v", err)
	}
	if (clienttools.Spec{InputSchema: json.RawMessage(`{"type": "object", "properties": {"a": {"anyOf": []}}}`)}).Checked() ||
		!(clienttools.Spec{InputSchema: json.RawMessage(locationSchema)}).Checked() {
		t.Error("Checked does not tell the subset's schemas from others")
	}
}

func TestDeclareAndRead(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		st := sessions.NewStore(db)
		s, _, err := st.Resolve(ctx, sessions.Key{Surface: sessions.SurfaceAPI, SurfaceID: "x", AgentID: "main"}, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		hub := clienttools.New(db, clienttools.Options{})
		if got, err := hub.Declared(ctx, s.ID); err != nil || got != nil {
			t.Fatalf("before declaring: %v, %v", got, err)
		}
		specs := []clienttools.Spec{{Name: "b", Description: "B", InputSchema: json.RawMessage(locationSchema)}, {Name: "a", Description: "A"}}
		if err := hub.Declare(ctx, s.ID, specs); err != nil {
			t.Fatal(err)
		}
		got, err := hub.Declared(ctx, s.ID)
		if err != nil || len(got) != 2 || got[0].Name != "b" || got[1].Name != "a" || !json.Valid(got[0].InputSchema) || got[1].InputSchema != nil {
			t.Fatalf("declared = %+v, %v", got, err)
		}
		if err := hub.Declare(ctx, s.ID, specs[1:]); err != nil {
			t.Fatal(err)
		}
		if got, _ := hub.Declared(ctx, s.ID); len(got) != 1 || got[0].Name != "a" {
			t.Fatalf("after replacing: %+v", got)
		}
		if err := hub.Declare(ctx, s.ID, nil); err != nil {
			t.Fatal(err)
		}
		if got, _ := hub.Declared(ctx, s.ID); got != nil {
			t.Fatalf("after removing: %+v", got)
		}
		if err := hub.Declare(ctx, "nope", specs); !errors.Is(err, clienttools.ErrNoSession) {
			t.Fatalf("declare in a missing session: %v", err)
		}
		if err := hub.Declare(ctx, s.ID, specs); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := hub.Declared(ctx, s.ID); err != nil || got != nil {
			t.Fatalf("a deleted session's tools: %+v, %v", got, err)
		}
	})
}

// timers lets a test fire the hub's timeouts.
type timers struct{ fire chan time.Time }

func (tm *timers) after(time.Duration) <-chan time.Time { return tm.fire }

func newHub(t *testing.T) (*clienttools.Hub, *timers) {
	tm := &timers{fire: make(chan time.Time)}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	return clienttools.New(nil, clienttools.Options{Timeout: time.Minute, After: tm.after, Now: func() time.Time { return now }}), tm
}

func waitAsync(ctx context.Context, p *clienttools.Pending) <-chan struct {
	r   clienttools.Result
	err error
} {
	ch := make(chan struct {
		r   clienttools.Result
		err error
	}, 1)
	go func() {
		r, err := p.Wait(ctx)
		ch <- struct {
			r   clienttools.Result
			err error
		}{r, err}
	}()
	return ch
}

func TestCallsWaitForTheirResults(t *testing.T) {
	hub, tm := newHub(t)
	ctx := context.Background()
	p1, err := hub.Expect(clienttools.Call{SessionID: "s", ID: "c1", Name: "get_location", Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !p1.Call().ExpiresAt.Equal(time.Date(2026, 3, 1, 9, 1, 0, 0, time.UTC)) {
		t.Errorf("expires at %v", p1.Call().ExpiresAt)
	}
	p2, _ := hub.Expect(clienttools.Call{SessionID: "s", ID: "c2", Name: "ping"})
	if _, err := hub.Expect(clienttools.Call{SessionID: "s", ID: "c2", Name: "ping"}); !errors.Is(err, clienttools.ErrInvalid) {
		t.Errorf("a second c2: %v", err)
	}
	if w := hub.Waiting("s"); len(w) != 2 || w[0].ID != "c1" || w[1].ID != "c2" {
		t.Fatalf("waiting = %+v", w)
	}
	w1, w2 := waitAsync(ctx, p1), waitAsync(ctx, p2)

	// A batch with one bad result delivers nothing.
	err = hub.Deliver("s", []clienttools.Result{{CallID: "c1", Output: "Berlin"}, {CallID: "c9"}})
	if !errors.Is(err, clienttools.ErrUnknownCall) || !strings.Contains(err.Error(), `waits for "c1", "c2"`) {
		t.Fatalf("deliver with an unknown call: %v", err)
	}
	if err := hub.Deliver("s", []clienttools.Result{{CallID: "c1"}, {CallID: "c1"}}); !errors.Is(err, clienttools.ErrInvalid) {
		t.Fatalf("deliver c1 twice: %v", err)
	}
	if err := hub.Deliver("other", []clienttools.Result{{CallID: "c1"}}); !errors.Is(err, clienttools.ErrNotWaiting) {
		t.Fatalf("deliver to another session: %v", err)
	}
	if err := hub.Deliver("s", []clienttools.Result{{CallID: "c1", Output: "Berlin"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-w1:
		if got.err != nil || got.r.Output != "Berlin" {
			t.Fatalf("c1 = %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("c1 got no result")
	}
	if w := hub.Waiting("s"); len(w) != 1 || w[0].ID != "c2" {
		t.Fatalf("waiting after c1 = %+v", w)
	}
	if err := hub.Deliver("s", []clienttools.Result{{CallID: "c1"}}); !errors.Is(err, clienttools.ErrUnknownCall) {
		t.Fatalf("c1 answered again: %v", err)
	}
	// c2's time runs out.
	tm.fire <- time.Time{}
	got := <-w2
	if !errors.Is(got.err, clienttools.ErrTimeout) || !strings.Contains(got.err.Error(), "ping (call c2) had no result within 1m0s") {
		t.Fatalf("c2 = %+v", got)
	}
	if err := hub.Deliver("s", []clienttools.Result{{CallID: "c2"}}); !errors.Is(err, clienttools.ErrNotWaiting) {
		t.Fatalf("c2 after its timeout: %v", err)
	}

	// A run that ends stops waiting.
	p3, _ := hub.Expect(clienttools.Call{SessionID: "s", ID: "c3"})
	cctx, cancel := context.WithCancel(ctx)
	w3 := waitAsync(cctx, p3)
	cancel()
	if got := <-w3; !errors.Is(got.err, context.Canceled) {
		t.Fatalf("c3 = %+v", got)
	}
	if w := hub.Waiting("s"); len(w) != 0 {
		t.Fatalf("still waiting: %+v", w)
	}
}
