package telegram

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	tt "github.com/parleyd/parley/adapters/telegram/telegramtest"
)

// echoSink stands in for the gateway: Deliver queues the message on its
// chat's lane and returns, and each lane sends "echo: <text>" back through
// the adapter, as the gateway's lanes and outbox do.
type echoSink struct {
	a     *Adapter
	lanes map[string]chan adapters.Inbound
	errs  chan error
}

func newEchoSink(ctx context.Context, a *Adapter, chats []string, depth int) *echoSink {
	s := &echoSink{a: a, lanes: map[string]chan adapters.Inbound{}, errs: make(chan error, 1)}
	for _, c := range chats {
		lane := make(chan adapters.Inbound, depth)
		s.lanes[c] = lane
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case in := <-lane:
					if _, err := a.Send(ctx, adapters.Outbound{ChatID: in.ChatID, Text: "echo: " + in.Text, ReplyTo: in.MessageID}); err != nil && ctx.Err() == nil {
						select {
						case s.errs <- err:
						default:
						}
					}
				}
			}
		}()
	}
	return s
}

func (s *echoSink) Deliver(ctx context.Context, in adapters.Inbound) error {
	lane, ok := s.lanes[in.ChatID]
	if !ok {
		return fmt.Errorf("no lane for chat %s", in.ChatID)
	}
	select {
	case lane <- in:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTelegramEndToEnd: 20 chats send at once through a fake Bot
// API; each message is polled, delivered, and answered with sendMessage.
// msgs/s counts answers; cpu-ms/msg is the whole process's CPU (the
// adapter, the echo sink, and the fake Bot API's side of every request).
func BenchmarkTelegramEndToEnd(b *testing.B) {
	const chats = 20
	srv := tt.NewServer()
	defer srv.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := New("tg-bench", yamlDecoder(fmt.Sprintf("token: %q\napi_endpoint: %q\npoll_timeout: 1", tt.Token, srv.Endpoint())), adapters.Deps{Log: log})
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	for c := range chats {
		ids = append(ids, fmt.Sprint(1000+c))
	}
	for i := range b.N {
		c := int64(1000 + i%chats)
		srv.InjectText(c, c, fmt.Sprintf("message %d from chat %d: **hello** there", i, c))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := newEchoSink(ctx, a, ids, b.N)
	done := make(chan error, 1)

	b.ResetTimer()
	cpu0, t0 := cpuTime(), time.Now()
	go func() { done <- a.Start(ctx, sink) }()
	waitCtx, stop := context.WithTimeout(ctx, 5*time.Minute)
	defer stop()
	if _, err := srv.WaitSent(waitCtx, b.N); err != nil {
		b.Fatal(err)
	}
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	b.StopTimer()
	select {
	case err := <-sink.errs:
		b.Fatal(err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/msg")
}
