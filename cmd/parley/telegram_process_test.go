package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/speech/speechtest"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go runs on (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// procCPU is the CPU time (user and system, all threads) process pid has
// used so far; "self" is this process.
func procCPU(pid string) (time.Duration, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: no command name in %q", pid, raw)
	}
	fields := strings.Fields(string(raw[end+1:]))
	// Fields 14 and 15 of stat (utime, stime) are 12 and 13 after the name.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields after the command name", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%s/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// tailBuffer keeps what a process writes, for the error message when it
// fails: a syncWriter over a buffer.
type tailBuffer struct {
	syncWriter
	buf bytes.Buffer
}

func newTailBuffer() *tailBuffer {
	t := &tailBuffer{}
	t.w = &t.buf
	return t
}

// String is the last 8 KiB written.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf.Bytes()
	if len(b) > 8<<10 {
		return "…" + string(b[len(b)-8<<10:])
	}
	return string(b)
}

// parleyProcess is `parley run --config FILE` in a process of its own.
type parleyProcess struct {
	tb     testing.TB
	cmd    *exec.Cmd
	pid    string
	output *tailBuffer
	// ctx ends when the process does.
	ctx     context.Context
	exited  chan struct{}
	waitErr error // once exited is closed
}

// startParley runs parley on config, as its own process, and returns it
// once its Telegram bot polls tg for updates. It kills the process at the
// end of the test if it still runs.
func startParley(tb testing.TB, tg *telegramtest.Server, config string) *parleyProcess {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "parley.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	return runParley(tb, tg, path)
}

// runParley runs `parley run --config path` and returns it once its
// Telegram bot polls tg (again, for a restart).
func runParley(tb testing.TB, tg *telegramtest.Server, path string) *parleyProcess {
	tb.Helper()
	polled := tg.Calls("getUpdates")
	p := &parleyProcess{tb: tb, cmd: parleyCommand("run", "--config", path), output: newTailBuffer(), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p.pid = strconv.Itoa(p.cmd.Process.Pid)
	go func() { p.waitErr = p.cmd.Wait(); close(p.exited) }()
	ctx, cancel := context.WithCancel(context.Background())
	p.ctx = ctx
	go func() { <-p.exited; cancel() }()
	tb.Cleanup(func() {
		select {
		case <-p.exited:
		default: // a failure on the way: don't leave it running
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	readyCtx, cancelReady := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancelReady()
	if _, err := tg.WaitPolls(readyCtx, polled+1); err != nil {
		p.fatalf("parley never polled for updates: %v", err)
	}
	return p
}

// fatalf ends the test with what parley wrote last.
func (p *parleyProcess) fatalf(format string, args ...any) {
	p.tb.Helper()
	msg := fmt.Sprintf(format, args...)
	select {
	case <-p.exited:
		msg += fmt.Sprintf(" (parley exited: %v)", p.waitErr)
	default:
	}
	p.tb.Fatalf("%s\nparley's output:\n%s", msg, p.output.String())
}

// cpu is the CPU time parley has used so far.
func (p *parleyProcess) cpu() time.Duration {
	p.tb.Helper()
	d, err := procCPU(p.pid)
	if err != nil {
		p.fatalf("%v", err)
	}
	return d
}

// kill ends parley with SIGKILL, as a crash or the OOM killer would, and
// waits for it to be gone.
func (p *parleyProcess) kill() {
	p.tb.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.fatalf("SIGKILL: %v", err)
	}
	<-p.exited
}

// stop sends SIGTERM, as systemd or Docker do, and requires parley to
// exit 0 within timeout.
func (p *parleyProcess) stop(timeout time.Duration) {
	p.tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
		if p.waitErr != nil {
			p.fatalf("parley exited after SIGTERM with %v", p.waitErr)
		}
	case <-time.After(timeout):
		p.fatalf("parley did not stop within %s of SIGTERM", timeout)
	}
}

// BenchmarkTelegramDaemonProcess is BenchmarkTelegramThroughTheGateway with
// parley in a process of its own, started as `parley run --config FILE`,
// so its CPU per message is parley's alone; the fake Bot API's (this
// process) is reported beside it as fake-cpu-ms/msg, and their ratio as
// cpu/fake-cpu. It runs twice: answered by the echo model, and by the
// OpenAI provider against an instant OpenAI-compatible fake (in this
// process too, so its CPU counts in fake-cpu-ms/msg), which measures what
// the provider path costs parley on top.
func BenchmarkTelegramDaemonProcess(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads the daemon's CPU time from /proc/<pid>/stat, which only Linux has")
	}
	b.Run("echo", func(b *testing.B) { benchTelegramDaemonProcess(b, "") })
	b.Run("openai-compatible", func(b *testing.B) {
		model := llmtest.NewOpenAIEcho(b, 0)
		benchTelegramDaemonProcess(b, model.ConfigYAML()+"agents:\n  - id: default\n    model: openai/gpt-test\n")
	})
	// The same two with tracing on, every trace kept, exported over
	// OTLP/HTTP to a collector in this process that reads and discards
	// them (its CPU counts in fake-cpu-ms/msg): against "echo" and
	// "openai-compatible", what tracing costs parley.
	b.Run("echo-traced", func(b *testing.B) {
		otlp := newDiscardingCollector(b)
		benchTelegramDaemonProcess(b, otlp.ConfigYAML())
		otlp.check(b)
	})
	b.Run("openai-compatible-traced", func(b *testing.B) {
		otlp := newDiscardingCollector(b)
		model := llmtest.NewOpenAIEcho(b, 0)
		benchTelegramDaemonProcess(b, otlp.ConfigYAML()+model.ConfigYAML()+"agents:\n  - id: default\n    model: openai/gpt-test\n")
		otlp.check(b)
	})
	// Each message a voice note, transcribed by an instant fake speech
	// server (in this process), answered by echo: against "echo", what a
	// voice note costs parley (fetching it, keeping its audio with the
	// message, the transcription request), its HTTP exchanges included;
	// BenchmarkVoiceBeyondProviderCall tells them apart.
	b.Run("voice-transcribed", func(b *testing.B) {
		sp := speechtest.New(b)
		benchTelegramDaemonProcess(b, "speech:\n  base_url: "+sp.BaseURL()+"\n  api_key: sk-speech-test\n", func(tg *telegramtest.Server) func(int64, string) {
			return func(chat int64, text string) {
				audio := "OggS voice: " + text
				sp.Add(audio, text)
				tg.InjectVoice(chat, chat, 0, []byte(audio))
			}
		})
	})
}

func benchTelegramDaemonProcess(b *testing.B, modelYAML string, via ...func(*telegramtest.Server) func(int64, string)) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	dir := b.TempDir()
	p := startParley(b, tg, "database:\n  url: "+filepath.Join(dir, "data", "parley.db")+"\n"+
		"http:\n  listen: 127.0.0.1:0\n"+ // any free port: nothing here calls it
		"gateway:\n  debounce: 0s\n"+modelYAML+
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    "))

	const chats = 20
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Minute)
	defer cancel()
	parleyBefore := p.cpu()
	selfBefore, err := procCPU("self")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	send := func(chat int64, text string) { tg.InjectText(chat, chat, text) }
	if len(via) > 0 {
		send = via[0](tg)
	}
	if err := telegramtest.DriveChatsWith(ctx, tg, b.N, chats, 10, send); err != nil {
		p.fatalf("%v", err)
	}
	elapsed := time.Since(start)
	parleyAfter := p.cpu()
	selfAfter, err := procCPU("self")
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	perMsg := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(perMsg(parleyAfter-parleyBefore), "cpu-ms/msg")
	b.ReportMetric(perMsg(selfAfter-selfBefore), "fake-cpu-ms/msg")
	// The fake runs the same code every time, so its CPU shows how fast the
	// machine is running: the ratio compares runs made at different speeds.
	if fake := selfAfter - selfBefore; fake > 0 {
		b.ReportMetric(float64(parleyAfter-parleyBefore)/float64(fake), "cpu/fake-cpu")
	}
	p.stop(20 * time.Second)
}

// discardingCollector is an OTLP/HTTP collector that reads each export
// and throws it away, counting the bytes.
type discardingCollector struct {
	*httptest.Server
	bytes atomic.Int64
}

func newDiscardingCollector(tb testing.TB) *discardingCollector {
	c := &discardingCollector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		c.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	tb.Cleanup(c.Close)
	return c
}

// ConfigYAML is the telemetry section sending every trace to c.
func (c *discardingCollector) ConfigYAML() string {
	return "telemetry:\n  otlp:\n    endpoint: " + c.URL + "\n  sample_ratio: 1\n"
}

// check fails the benchmark when no span reached c: it measured nothing.
func (c *discardingCollector) check(tb testing.TB) {
	tb.Helper()
	if c.bytes.Load() == 0 {
		tb.Fatal("the collector received no spans")
	}
}
