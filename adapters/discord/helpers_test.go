package discord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/discord/discordtest"
)

// yamlDecoder decodes src strictly, as the daemon's config does.
func yamlDecoder(src string) adapters.Decoder {
	return func(v any) error {
		dec := yaml.NewDecoder(strings.NewReader(src))
		dec.KnownFields(true)
		return dec.Decode(v)
	}
}

// logBuffer collects log output, safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLog() (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// newAdapter builds an adapter for srv from the config keys in extra,
// with fast retries.
func newAdapter(t *testing.T, srv *discordtest.Server, extra string, log *slog.Logger) *Adapter {
	t.Helper()
	src := fmt.Sprintf("token: %q\napi_url: %s\n%s", srv.Token(), srv.URL(), extra)
	ad, err := New("dc-test", yamlDecoder(src), adapters.Deps{Log: log})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	a := ad.(*Adapter)
	a.deliverBackoff = func(int) time.Duration { return 20 * time.Millisecond }
	a.connectBackoff = func(int) time.Duration { return 50 * time.Millisecond }
	return a
}

// sink records what is delivered; it fails the first failN deliveries.
type sink struct {
	mu    sync.Mutex
	failN int
	tries []adapters.Inbound // every call, failed or not
	ch    chan adapters.Inbound
}

func newSink() *sink { return &sink{ch: make(chan adapters.Inbound, 100)} }

func (s *sink) Deliver(ctx context.Context, in adapters.Inbound) error {
	s.mu.Lock()
	s.tries = append(s.tries, in)
	fail := s.failN > 0
	if fail {
		s.failN--
	}
	s.mu.Unlock()
	if fail {
		return errors.New("store is down")
	}
	s.ch <- in
	return nil
}

func (s *sink) Tries() []adapters.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]adapters.Inbound(nil), s.tries...)
}

// next waits for the next delivered message.
func (s *sink) next(t *testing.T) adapters.Inbound {
	t.Helper()
	select {
	case in := <-s.ch:
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("no message delivered in 10s")
		return adapters.Inbound{}
	}
}

// start runs a.Start until the test ends, and checks that it returns
// promptly and without error then.
func start(t *testing.T, a *Adapter, s adapters.Sink) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx, s) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v at shutdown", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Start still running 10s after its context ended")
		}
	})
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}
