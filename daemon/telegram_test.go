package daemon

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/speech/speechtest"
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

// BenchmarkTelegramVoiceThroughTheGateway is BenchmarkTelegramThroughTheGateway
// with every message a voice note, transcribed by an instant fake speech
// server: in one process, so a CPU profile (-cpuprofile, and pprof's
// -diff_base against the text benchmark's) shows where a voice note's
// extra CPU goes.
func BenchmarkTelegramVoiceThroughTheGateway(b *testing.B) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	sp := speechtest.New(b)
	_, stop := runWithTelegram(b, tg, "speech:\n  base_url: "+sp.BaseURL()+"\n  api_key: sk-speech-test\n")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	start := time.Now()
	err := telegramtest.DriveChatsWith(ctx, tg, b.N, 20, 10, func(chat int64, text string) {
		audio := "OggS voice: " + text
		sp.Add(audio, text)
		tg.InjectVoice(chat, chat, 0, []byte(audio))
	})
	if err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/msg")
}
