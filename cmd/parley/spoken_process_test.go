package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/speech/speechtest"
)

// BenchmarkTelegramSpokenReplyProcess is what a spoken reply costs parley
// as its own process: text messages over the fake Bot API, answered by the
// echo model, once as text ("text") and once spoken ("spoken": the reply
// synthesized by an instant fake speech server in this process and sent
// with sendVoice). Both run in one invocation, so their cpu-ms/msg compare
// on the machine as it is:
//
//	go test -run '^$' -bench BenchmarkTelegramSpokenReplyProcess -benchtime 400x ./cmd/parley
func BenchmarkTelegramSpokenReplyProcess(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads the daemon's CPU time from /proc/<pid>/stat, which only Linux has")
	}
	b.Run("text", func(b *testing.B) { benchSpoken(b, false) })
	b.Run("spoken", func(b *testing.B) { benchSpoken(b, true) })
}

func benchSpoken(b *testing.B, spoken bool) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	sp := speechtest.New(b)
	sp.Audio = []byte("OggS a spoken reply")
	voice := "off"
	if spoken {
		voice = "on"
	}
	p := startParley(b, tg, "database:\n  url: "+filepath.Join(b.TempDir(), "data", "parley.db")+"\n"+
		"http:\n  listen: 127.0.0.1:0\n"+
		"gateway:\n  debounce: 0s\n"+
		"speech:\n  base_url: "+sp.BaseURL()+"\n  api_key: sk-speech-test\n"+
		"agents:\n  - id: default\n    voice_replies: "+voice+"\n"+
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    "))
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Minute)
	defer cancel()
	const chats, window = 20, 10
	answered := func() int {
		if spoken {
			return len(tg.Files())
		}
		return tg.SentCount()
	}
	parleyBefore := p.cpu()
	selfBefore, err := procCPU("self")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	injected := 0
	for done := answered(); done < b.N; done = answered() {
		for injected < b.N && injected-done < chats*window {
			chat := int64(1000 + injected%chats)
			tg.InjectText(chat, chat, fmt.Sprintf("message %d from chat %d", injected, chat))
			injected++
		}
		if err := tg.WaitFor(ctx, func() bool { return answered() > done }); err != nil {
			p.fatalf("%d of %d answered: %v", done, b.N, err)
		}
	}
	elapsed := time.Since(start)
	parleyAfter := p.cpu()
	selfAfter, err := procCPU("self")
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if spoken {
		for _, f := range tg.Files() {
			if f.Method != "sendVoice" || string(f.Data) != string(sp.Audio) {
				p.fatalf("a spoken reply sent as %s with %q, want sendVoice with the synthesized audio", f.Method, f.Data)
			}
		}
		if n := len(sp.Spoken()); n < b.N {
			p.fatalf("%d replies synthesized for %d messages", n, b.N)
		}
	}
	perMsg := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(perMsg(parleyAfter-parleyBefore), "cpu-ms/msg")
	b.ReportMetric(perMsg(selfAfter-selfBefore), "fake-cpu-ms/msg")
	p.stop(20 * time.Second)
}
