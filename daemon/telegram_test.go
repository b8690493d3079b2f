package daemon

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
)

// runWithTelegram starts the daemon as `parley run` would, with one
// Telegram bot on the fake Bot API; it returns when the daemon stopped.
func runWithTelegram(tb testing.TB, tg *telegramtest.Server, extra string) (*Daemon, func()) {
	tb.Helper()
	d, _, stop := testDaemon(tb, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+
		indentYAML(tg.ConfigYAML(), "    ")+extra, configuredChannels(tb))
	return d, stop
}

func indentYAML(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// Three lines of config and a bot token: a Telegram user talks to the
// agent, and a message Telegram delivers twice is answered once.
func TestTelegramThroughTheDaemon(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	_, stop := runWithTelegram(t, tg, "")
	defer stop()
	tg.InjectText(42, 42, "hello parley")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sent, err := tg.WaitSent(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if sent[0].ChatID != "42" || !strings.Contains(sent[0].Text, "hello parley") {
		t.Fatalf("sent %+v", sent[0])
	}
	if st := sent[0]; st.ReplyTo == 0 {
		t.Fatalf("the reply doesn't quote the message: %+v", st)
	}
}

// BenchmarkTelegramThroughTheGateway: 20 chats send at once through the
// fake Bot API, each with up to 10 messages unanswered; every message is
// answered by the echo model through the whole daemon. It reports messages answered per second and the daemon's
// CPU per message (the fake's own work included).
func BenchmarkTelegramThroughTheGateway(b *testing.B) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	_, stop := runWithTelegram(b, tg, "")
	defer stop()
	const chats = 20
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	start := time.Now()
	if err := telegramtest.DriveChats(ctx, tg, b.N, chats, 10); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/msg")
}
