package telegram

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/internal/syncbuf"
)

// yamlDecoder strictly decodes a YAML snippet, as the daemon's config
// decoder does.
func yamlDecoder(snippet string) adapters.Decoder {
	return func(v any) error {
		dec := yaml.NewDecoder(strings.NewReader(snippet))
		dec.KnownFields(true)
		return dec.Decode(v)
	}
}

// syncBuffer is a log destination tests can read while the adapter writes.
type syncBuffer = syncbuf.Buffer

// harness is an adapter on a fake Bot API, with its log captured.
type harness struct {
	t   *testing.T
	srv *telegramtest.Server
	a   *Adapter
	log *syncBuffer
	// health hears the adapter's health changes.
	health chan struct{}
}

// newHarness builds an adapter for srv from the token, the fake's
// endpoint and extra YAML keys.
func newHarness(t *testing.T, srv *telegramtest.Server, token, extra string) *harness {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	y := fmt.Sprintf("token: %q\napi_endpoint: %q\n%s", token, srv.Endpoint(), extra)
	a, err := New("tg-test", yamlDecoder(y), adapters.Deps{Log: log})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	a.backoff = func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	h := &harness{t: t, srv: srv, a: a, log: logs, health: make(chan struct{}, 1)}
	a.healthChanged = func() {
		select {
		case h.health <- struct{}{}:
		default:
		}
	}
	return h
}

// waitHealth waits until the adapter's Health satisfies cond.
func (h *harness) waitHealth(ctx context.Context, cond func(ok bool, detail string) bool) error {
	for {
		if cond(h.a.Health()) {
			return nil
		}
		select {
		case <-h.health:
		case <-ctx.Done():
			ok, detail := h.a.Health()
			return fmt.Errorf("health %v %q: %w", ok, detail, ctx.Err())
		}
	}
}

// start runs the adapter until the returned stop is called; stop returns
// what Start returned.
func (h *harness) start(sink adapters.Sink) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.a.Start(ctx, sink) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				err = fmt.Errorf("Start did not return within 10s of its context ending")
			}
		})
		return err
	}
	h.t.Cleanup(func() { _ = stop() })
	return stop
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sink records what it is given and fails on request.
type sink struct {
	mu    sync.Mutex
	got   []adapters.Inbound
	calls int
	// fail, when set, decides whether call n (from 1) fails.
	fail    func(n int, in adapters.Inbound) error
	changed chan struct{}
}

func newSink() *sink { return &sink{changed: make(chan struct{})} }

func (s *sink) Deliver(ctx context.Context, in adapters.Inbound) error {
	if err := in.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	defer func() {
		close(s.changed)
		s.changed = make(chan struct{})
	}()
	if s.fail != nil {
		if err := s.fail(s.calls, in); err != nil {
			return err
		}
	}
	s.got = append(s.got, in)
	return nil
}

func (s *sink) taken() []adapters.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]adapters.Inbound(nil), s.got...)
}

// wait waits until cond holds over the calls and the messages taken.
func (s *sink) wait(ctx context.Context, cond func(calls int, got []adapters.Inbound) bool) ([]adapters.Inbound, error) {
	for {
		s.mu.Lock()
		calls, got, ch := s.calls, append([]adapters.Inbound(nil), s.got...), s.changed
		s.mu.Unlock()
		if cond(calls, got) {
			return got, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return got, fmt.Errorf("after %d calls, %d taken: %w", calls, len(got), ctx.Err())
		}
	}
}

func (s *sink) waitTaken(ctx context.Context, n int) ([]adapters.Inbound, error) {
	return s.wait(ctx, func(_ int, got []adapters.Inbound) bool { return len(got) >= n })
}

// textUpdate is a text message from a user in a private chat.
func textUpdate(chat int64, msgID int, text string) telegramtest.Update {
	u := telegramtest.User{ID: chat, FirstName: "Ann", LastName: "Lee", Username: "ann"}
	return telegramtest.Update{Message: &telegramtest.Message{
		MessageID: msgID, From: &u, Chat: telegramtest.PrivateChat(u), Date: 1700000000, Text: text,
	}}
}
