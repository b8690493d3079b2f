package adapters_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
)

// registryRuns keeps TestRegistry's type names unique under -count=N, since
// the registry is global.
var registryRuns atomic.Int32

func TestRegistry(t *testing.T) {
	rec := adapterstest.New()
	typ := fmt.Sprintf("registry-test-%d", registryRuns.Add(1))
	adapters.Register(typ, func(id adapters.ID, decode adapters.Decoder, deps adapters.Deps) (adapters.Adapter, error) {
		var cfg struct{ Token string }
		if err := decode(&cfg); err != nil {
			return nil, err
		}
		if cfg.Token == "" {
			return nil, errors.New("token is required")
		}
		return rec, nil
	})
	a, err := adapters.New(typ, "rt-1", func(v any) error {
		v.(*struct{ Token string }).Token = "x"
		return nil
	}, adapters.Deps{})
	if err != nil || a != rec {
		t.Fatalf("New: %v %v", a, err)
	}
	_, err = adapters.New(typ, "rt-2", func(any) error { return nil }, adapters.Deps{})
	if err == nil || !strings.Contains(err.Error(), "adapter rt-2 ("+typ+"): token is required") {
		t.Fatalf("factory error not attributed: %v", err)
	}
	_, err = adapters.New("carrier-pigeon", "cp", nil, adapters.Deps{})
	if !errors.Is(err, adapters.ErrUnknownType) || !strings.Contains(err.Error(), typ) {
		t.Fatalf("unknown type: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name twice did not panic")
		}
	}()
	adapters.Register(typ, func(adapters.ID, adapters.Decoder, adapters.Deps) (adapters.Adapter, error) { return nil, nil })
}

func TestInboundValidate(t *testing.T) {
	good := adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "1", UserID: "1", MessageID: "9", Text: "hi", Time: time.Now()}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mutate func(*adapters.Inbound)
		want   string
	}{
		{"missing ids", func(in *adapters.Inbound) { in.ChatID, in.MessageID = "", "" }, "chat_id, message_id missing"},
		{"too many files", func(in *adapters.Inbound) { in.Files = make([]adapters.FileRef, 11) }, "11 files; at most 10"},
		{"huge text", func(in *adapters.Inbound) { in.Text = strings.Repeat("a", adapters.MaxTextBytes+1) }, "at most 1048576"},
		{"bad utf-8", func(in *adapters.Inbound) { in.Text = "\xff" }, "not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := good
			tc.mutate(&in)
			err := in.Validate()
			if !errors.Is(err, adapters.ErrInvalidInbound) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRecorder(t *testing.T) {
	rec := adapterstest.New()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := make(chan adapters.Inbound, 1)
	go rec.Start(ctx, adapters.SinkFunc(func(_ context.Context, in adapters.Inbound) error { got <- in; return nil }))
	for rec.Inject(ctx, adapters.Inbound{Text: "ping"}) != nil {
		select {
		case <-ctx.Done():
			t.Fatal("Start never took the sink")
		case <-time.After(time.Millisecond):
		}
	}
	if in := <-got; in.Text != "ping" {
		t.Fatalf("injected %q", in.Text)
	}
	rec.FailNext(1, &adapters.RateLimitError{RetryAfter: time.Second})
	var rl *adapters.RateLimitError
	if _, err := rec.Send(ctx, adapters.Outbound{Text: "a"}); !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Fatalf("injected failure: %v", err)
	}
	go func() { _, _ = rec.Send(ctx, adapters.Outbound{Text: "b"}) }()
	sent, err := rec.WaitSent(ctx, 1)
	if err != nil || len(sent) != 1 || sent[0].Text != "b" {
		t.Fatalf("WaitSent: %v %v", sent, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancelShort()
	if _, err := rec.WaitSent(short, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitSent past its deadline: %v", err)
	}
}

// Sender attribution belongs to group chats, never to the API's messages
// (whose session may be keyed like a group's) or a direct chat's.
func TestAttributed(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   adapters.Inbound
		want string
	}{
		{"direct chat", adapters.Inbound{UserID: "7", DisplayName: "Ann", Text: "Hello"}, "Hello"},
		{"group", adapters.Inbound{Group: true, UserID: "7", DisplayName: "Ann", Text: "Hello"}, "Ann: Hello"},
		{"group without a name", adapters.Inbound{Group: true, UserID: "7", Text: "Hello"}, "7: Hello"},
		{"API, keyed like a group", adapters.Inbound{Group: true, UserID: "api", Text: "Hello", Unattributed: true}, "Hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.Attributed(); got != tc.want {
				t.Errorf("Attributed() = %q, want %q", got, tc.want)
			}
		})
	}
}
