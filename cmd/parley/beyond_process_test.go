package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/speech"
	"github.com/parleyd/parley/speech/speechtest"
)

// envExchanges makes the test binary the exchanges process of
// BenchmarkVoiceBeyondProviderCall: it loads the parley config at this
// path and makes, on command, the HTTP exchanges a voice turn makes.
const envExchanges = "PARLEY_TEST_EXCHANGES_CONFIG"

// beyondChats and beyondWindow are how the benchmark's messages spread:
// over this many private chats, with up to this many unanswered in each;
// beyondWarmUp is how many messages each part answers before it counts.
const beyondChats, beyondWindow, beyondWarmUp = 20, 10, 2 * beyondChats

// BenchmarkVoiceBeyondProviderCall measures what issue 36 claims: a voice
// note, and a spoken reply, cost parley no CPU beyond the provider calls
// they need. Each sub-benchmark runs, in rounds one after the other so the
// machine's speed is the same for all:
//
//   - parley answering text messages (text-cpu-ms/msg),
//   - a second parley, configured the same, answering the same messages as
//     voice notes, or with spoken replies (voice-cpu-ms/msg),
//   - a third process (the exchanges process: this test binary) making only
//     the HTTP exchanges the voice path adds, with parley's own client code
//     (the Telegram adapter, built by its registry from the same config,
//     and the speech client), against the same fake servers answering at
//     once, with the same bytes (exchanges-cpu-ms/msg).
//
// beyond-cpu-ms/msg is voice − text − exchanges: the CPU a voice turn
// costs parley that is not the provider calls themselves. For a voice note
// the exchanges are getFile, the file's download and the transcription;
// for a spoken reply the synthesis and sendVoice, less the sendMessage it
// replaces. The fake servers run in this process, so none of their CPU is
// counted.
//
// transcribed-vs-file sets a voice note beside what any file costs: its
// first parley answers, in place of text messages, the same messages as
// documents with the voice notes' bytes and their transcripts as captions
// (file-cpu-ms/msg). Parley fetches and keeps every file of a message, so
// both daemons make getFile and the download and keep the bytes; the
// exchanges process makes only the transcription, and beyond-cpu-ms/msg is
// what transcribing costs parley beyond its provider call.
//
//	go test -run '^$' -bench BenchmarkVoiceBeyondProviderCall -benchtime 3000x ./cmd/parley
func BenchmarkVoiceBeyondProviderCall(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads the processes' CPU time from /proc/<pid>/stat, which only Linux has")
	}
	b.Run("transcribed", func(b *testing.B) {
		sp := speechtest.New(b)
		speechYAML := "speech:\n  base_url: " + sp.BaseURL() + "\n  api_key: sk-speech-test\n"
		// The text the model reads of a voice note is its transcript and a
		// line naming its file, and the echo model answers with all of it:
		// the text messages say the same, so both daemons build the same
		// prompts and send the same replies, and only the voice note's own
		// work differs (checked below).
		text := newBeyondDaemon(b, "text", speechYAML, func(d *beyondDaemon, k int, chat int64) {
			d.tg.InjectText(chat, chat, beyondText(k, chat)+"\n"+voiceFileLine(k, chat))
		})
		voice := newBeyondDaemon(b, "voice", speechYAML, func(d *beyondDaemon, k int, chat int64) {
			audio := beyondAudio(k, chat)
			sp.Add(string(audio), beyondText(k, chat))
			d.tg.InjectVoice(chat, chat, 0, audio)
		})
		ex := startExchanges(b, speechYAML)
		prepare := func(first, n int) {
			for k := first; k < first+n; k++ {
				chat := beyondChat(k)
				audio := beyondAudio(k, chat)
				sp.Add(string(audio), beyondText(k, chat))
				ex.tg.AddFile(exchangeFileID(k), audio)
			}
		}
		runBeyond(b, text, voice, func(first, n int) time.Duration {
			if first == 0 { // after the warm-up: the same messages answered
				if t, v := replies(text.tg), replies(voice.tg); !slices.Equal(t, v) {
					b.Fatalf("the text messages' replies %q are not the voice notes' %q: the two daemons do different work", t, v)
				}
			}
			prepare(first, n)
			return ex.run(exchangeCommand{Kind: "transcribe", First: first, N: n})
		})
		if heard := len(sp.Heard()); heard < 2*b.N {
			b.Fatalf("%d transcriptions for %d voice notes and %d exchanges", heard, b.N, b.N)
		}
	})
	b.Run("transcribed-vs-file", func(b *testing.B) {
		sp := speechtest.New(b)
		speechYAML := "speech:\n  base_url: " + sp.BaseURL() + "\n  api_key: sk-speech-test\n"
		// Files are named, never read (max_text_bytes: 0): the document is
		// kept and named in one line, as a voice note is, and the chat is
		// told nothing of it. Its name makes that line as long as a voice
		// note's, so the prompts and replies are the same size, and differ
		// only in that line (checked below).
		agentYAML := speechYAML + "agents:\n  - id: default\n    files:\n      max_text_bytes: 0\n"
		name := keptFileName()
		file := newBeyondDaemon(b, "file", agentYAML, func(d *beyondDaemon, k int, chat int64) {
			d.tg.InjectDocument(chat, chat, name, "text/plain", beyondAudio(k, chat), beyondText(k, chat))
		})
		voice := newBeyondDaemon(b, "voice", agentYAML, func(d *beyondDaemon, k int, chat int64) {
			audio := beyondAudio(k, chat)
			sp.Add(string(audio), beyondText(k, chat))
			d.tg.InjectVoice(chat, chat, 0, audio)
		})
		ex := startExchanges(b, speechYAML)
		file.baseline = "file"
		runBeyond(b, file, voice, func(first, n int) time.Duration {
			if first == 0 { // after the warm-up: the same messages answered
				checkKeptFileReplies(b, replies(file.tg), replies(voice.tg))
			}
			for k := first; k < first+n; k++ {
				chat := beyondChat(k)
				sp.Add(string(beyondAudio(k, chat)), beyondText(k, chat))
			}
			return ex.run(exchangeCommand{Kind: "transcription", First: first, N: n})
		})
		if heard := len(sp.Heard()); heard < 2*b.N {
			b.Fatalf("%d transcriptions for %d voice notes and %d exchanges", heard, b.N, b.N)
		}
		// Both kept every file, and each daemon fetched each file once.
		for _, d := range []*beyondDaemon{file, voice} {
			if kept := d.keptFiles(); kept != beyondWarmUp+b.N {
				b.Fatalf("%d files kept of %d messages", kept, beyondWarmUp+b.N)
			}
			if got := d.tg.Calls("getFile"); got != beyondWarmUp+b.N {
				b.Fatalf("%d getFile calls for %d messages", got, beyondWarmUp+b.N)
			}
		}
	})
	b.Run("spoken", func(b *testing.B) {
		sp := speechtest.New(b)
		sp.Audio = []byte("OggS a spoken reply")
		speechYAML := "speech:\n  base_url: " + sp.BaseURL() + "\n  api_key: sk-speech-test\n"
		inject := func(d *beyondDaemon, k int, chat int64) { d.tg.InjectText(chat, chat, beyondText(k, chat)) }
		text := newBeyondDaemon(b, "text", speechYAML+"agents:\n  - id: default\n    voice_replies: off\n", inject)
		spoken := newBeyondDaemon(b, "voice", speechYAML+"agents:\n  - id: default\n    voice_replies: on\n", inject)
		spoken.answered = func() int { return spoken.tg.Calls("sendVoice") }
		ex := startExchanges(b, speechYAML)
		runBeyond(b, text, spoken, func(first, n int) time.Duration {
			// The reply text parley sent for a message like these.
			reply := text.tg.Sent()[0].Text
			return ex.run(exchangeCommand{Kind: "speak", First: first, N: n, Text: reply}) -
				ex.run(exchangeCommand{Kind: "send", First: first, N: n, Text: reply})
		})
		for _, f := range spoken.tg.Files() {
			if f.Method != "sendVoice" || string(f.Data) != string(sp.Audio) {
				b.Fatalf("a spoken reply sent as %s with %q, want sendVoice with the synthesized audio", f.Method, f.Data)
			}
		}
	})
}

// beyondText is the k-th message's text, as the telegramtest drivers
// write it; beyondAudio is the voice note saying it.
func beyondText(k int, chat int64) string { return fmt.Sprintf("message %d from chat %d", k, chat) }
func beyondAudio(k int, chat int64) []byte {
	return []byte("OggS voice: " + beyondText(k, chat))
}

// replies are the texts tg was sent, sorted.
func replies(tg *telegramtest.Server) []string {
	var out []string
	for _, m := range tg.Sent() {
		out = append(out, m.Text)
	}
	slices.Sort(out)
	return out
}

// voiceFileLine is the line the model reads, below its transcript, of the
// k-th voice note (agent.userContent's).
func voiceFileLine(k int, chat int64) string {
	return "[File: voice.ogg, audio/ogg, " + sessions.ByteSize(int64(len(beyondAudio(k, chat)))) + "; " + gateway.TranscribedNote + "]"
}

// notReadNote is the note on a file whose text the turn's allowance
// leaves out (turns.readFile's).
const notReadNote = "not read: past this turn's allowance of file text (files.max_text_bytes)"

// keptFileName is the name of the documents of transcribed-vs-file: as
// long as makes the line the model reads of one as long as a voice
// note's.
func keptFileName() string {
	pad := len("voice.ogg, audio/ogg; "+gateway.TranscribedNote) - len("note.txt, text/plain; "+notReadNote)
	return "note" + strings.Repeat("_", max(pad, 0)) + ".txt"
}

// checkKeptFileReplies fails b unless the voice daemon's replies, with
// each voice note's line replaced by the document's, are the file
// daemon's, of the same size, and name the document.
func checkKeptFileReplies(b *testing.B, file, voice []string) {
	b.Helper()
	as := strings.NewReplacer(
		"[File: voice.ogg, audio/ogg, ", "[File: "+keptFileName()+", text/plain, ",
		"; "+gateway.TranscribedNote+"]", "; "+notReadNote+"]")
	var swapped []string
	for i, r := range voice {
		swapped = append(swapped, as.Replace(r))
		if i < len(file) && len(file[i]) != len(r) {
			b.Fatalf("a file's reply %q is not the size of a voice note's %q", file[i], r)
		}
	}
	slices.Sort(swapped)
	if !slices.Equal(file, swapped) {
		b.Fatalf("the files' replies %q are not the voice notes' %q with the voice note's line as the file's", file, voice)
	}
	for _, r := range file {
		if !strings.Contains(r, "[File: "+keptFileName()+", text/plain, ") {
			b.Fatalf("a file's reply %q doesn't name the file", r)
		}
	}
}

func beyondChat(k int) int64      { return int64(1000 + k%beyondChats) }
func exchangeFileID(k int) string { return "exchange-" + strconv.Itoa(k) }
func perMessage(d time.Duration, n int) float64 {
	return float64(d.Microseconds()) / 1000 / float64(n)
}

// beyondDaemon is parley as its own process behind its own fake Bot API.
type beyondDaemon struct {
	tg       *telegramtest.Server
	p        *parleyProcess
	db       string
	inject   func(d *beyondDaemon, k int, chat int64)
	answered func() int
	// baseline names the figure of the first daemon of runBeyond ("text"
	// when empty).
	baseline string
}

func newBeyondDaemon(b *testing.B, part, extraYAML string, inject func(d *beyondDaemon, k int, chat int64)) *beyondDaemon {
	tg := telegramtest.NewServer()
	b.Cleanup(tg.Close)
	d := &beyondDaemon{tg: tg, inject: inject, answered: tg.SentCount}
	// PARLEY_TEST_BEYOND_PROFILES=DIR writes each process's CPU profile
	// there, named after its sub-benchmark and part, for
	// go tool pprof -diff_base.
	if dir := os.Getenv("PARLEY_TEST_BEYOND_PROFILES"); dir != "" {
		name := strings.NewReplacer("/", "-").Replace(b.Name()) + "-" + part + ".prof"
		restore := os.Getenv("PARLEY_TEST_CPUPROFILE")
		os.Setenv("PARLEY_TEST_CPUPROFILE", filepath.Join(dir, name))
		defer os.Setenv("PARLEY_TEST_CPUPROFILE", restore)
	}
	d.db = filepath.Join(b.TempDir(), "data", "parley.db")
	d.p = startParley(b, tg, "database:\n  url: "+d.db+"\n"+
		"http:\n  listen: 127.0.0.1:0\n"+
		"gateway:\n  debounce: 0s\n"+extraYAML+
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+indentYAML(tg.ConfigYAML(), "    "))
	return d
}

// keptFiles is how many files the daemon's session file store holds.
func (d *beyondDaemon) keptFiles() int {
	ctx := context.Background()
	db, err := dbutil.Open(ctx, dbutil.Options{URL: d.db})
	if err != nil {
		d.p.fatalf("open the database: %v", err)
	}
	defer db.Close()
	var n int
	if err := db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM session_files").Scan(&n); err != nil {
		d.p.fatalf("count the kept files: %v", err)
	}
	return n
}

// drive sends messages first to first+n-1 and returns the CPU parley used
// until each was answered.
func (d *beyondDaemon) drive(ctx context.Context, first, n int) time.Duration {
	before := d.p.cpu()
	base := d.answered()
	injected := 0
	for done := 0; done < n; done = d.answered() - base {
		for injected < n && injected-done < beyondChats*beyondWindow {
			k := first + injected
			d.inject(d, k, beyondChat(k))
			injected++
		}
		if err := d.tg.WaitFor(ctx, func() bool { return d.answered()-base > done }); err != nil {
			d.p.fatalf("%d of %d answered: %v", done, n, err)
		}
	}
	return d.p.cpu() - before
}

// runBeyond runs the rounds of BenchmarkVoiceBeyondProviderCall: a warm-up
// of every part, then b.N messages in up to five rounds, each the text
// daemon's share, the voice daemon's and the exchanges'.
func runBeyond(b *testing.B, text, voice *beyondDaemon, exchanges func(first, n int) time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	text.drive(ctx, 0, beyondWarmUp)
	voice.drive(ctx, 0, beyondWarmUp)
	exchanges(0, beyondWarmUp)
	b.ResetTimer()
	var textCPU, voiceCPU, exchangesCPU time.Duration
	rounds := min(b.N, 5)
	first := beyondWarmUp
	for r := range rounds {
		n := b.N / rounds
		if r < b.N%rounds {
			n++
		}
		textCPU += text.drive(ctx, first, n)
		voiceCPU += voice.drive(ctx, first, n)
		exchangesCPU += exchanges(first, n)
		first += n
	}
	b.StopTimer()
	b.ReportMetric(perMessage(textCPU, b.N), cmp.Or(text.baseline, "text")+"-cpu-ms/msg")
	b.ReportMetric(perMessage(voiceCPU, b.N), "voice-cpu-ms/msg")
	b.ReportMetric(perMessage(exchangesCPU, b.N), "exchanges-cpu-ms/msg")
	b.ReportMetric(perMessage(voiceCPU-textCPU-exchangesCPU, b.N), "beyond-cpu-ms/msg")
	text.p.stop(20 * time.Second)
	voice.p.stop(20 * time.Second)
}

// exchangeCommand asks the exchanges process for N exchanges, numbered
// First on: "transcribe" (getFile, the download, the transcription),
// "transcription" (the transcription alone),
// "speak" (the synthesis of Text and sendVoice) or "send" (sendMessage of
// Text).
type exchangeCommand struct {
	Kind  string `json:"kind"`
	First int    `json:"first"`
	N     int    `json:"n"`
	Text  string `json:"text,omitempty"`
}

// exchangeResult is the CPU the exchanges process used for one command.
type exchangeResult struct {
	CPU   time.Duration `json:"cpu"`
	Error string        `json:"error,omitempty"`
}

// exchangesProcess is the exchanges process, with its own fake Bot API
// (the speech server is the daemons').
type exchangesProcess struct {
	tb  testing.TB
	tg  *telegramtest.Server
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	log *tailBuffer
}

func startExchanges(tb testing.TB, speechYAML string) *exchangesProcess {
	tb.Helper()
	tg := telegramtest.NewServer()
	tb.Cleanup(tg.Close)
	path := filepath.Join(tb.TempDir(), "parley.yaml")
	cfg := speechYAML + "adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n" + indentYAML(tg.ConfigYAML(), "    ")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	e := &exchangesProcess{tb: tb, tg: tg, cmd: exec.Command(os.Args[0]), log: newTailBuffer()}
	e.cmd.Env = append(os.Environ(), envExchanges+"="+path)
	if dir := os.Getenv("PARLEY_TEST_BEYOND_PROFILES"); dir != "" {
		name := strings.NewReplacer("/", "-").Replace(tb.Name()) + "-exchanges.prof"
		e.cmd.Env = append(e.cmd.Env, "PARLEY_TEST_CPUPROFILE="+filepath.Join(dir, name))
	}
	e.cmd.Stderr = e.log
	var err error
	if e.in, err = e.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	stdout, err := e.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	e.out = bufio.NewScanner(stdout)
	if err := e.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		e.in.Close() // it exits at the end of its input
		_ = e.cmd.Wait()
	})
	return e
}

// run makes the exchanges c asks for and returns the CPU they took.
func (e *exchangesProcess) run(c exchangeCommand) time.Duration {
	e.tb.Helper()
	line, _ := json.Marshal(c)
	if _, err := e.in.Write(append(line, '\n')); err != nil {
		e.tb.Fatalf("the exchanges process: %v\n%s", err, e.log.String())
	}
	if !e.out.Scan() {
		e.tb.Fatalf("the exchanges process ended: %v\n%s", e.out.Err(), e.log.String())
	}
	var res exchangeResult
	if err := json.Unmarshal(e.out.Bytes(), &res); err != nil || res.Error != "" {
		e.tb.Fatalf("the exchanges process answered %q (%v)\n%s", e.out.Text(), err, e.log.String())
	}
	return res.CPU
}

// serveExchanges is the exchanges process: the Telegram adapter and the
// speech client as parley builds them from the config, making the
// exchanges each command on stdin asks for, with as many at once as the
// benchmark has chats, and writing the CPU this process used for them.
func serveExchanges(path string) error {
	if prof := os.Getenv("PARLEY_TEST_CPUPROFILE"); prof != "" {
		f, err := os.Create(prof)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	built, err := adapters.Build(cfg, adapters.BuildOptions{})
	if err != nil {
		return err
	}
	tg := built["tg-main"]
	fetcher, _ := tg.(adapters.Fetcher)
	sender, _ := tg.(adapters.FileSender)
	sp := speech.FromConfig(cfg.Speech)
	if fetcher == nil || sender == nil || sp == nil {
		return errors.New("the config has no telegram channel tg-main or no speech provider")
	}
	one := func(ctx context.Context, c exchangeCommand, k int) error {
		chat := beyondChat(k)
		chatID := strconv.FormatInt(chat, 10)
		switch c.Kind {
		case "transcribe": // as gateway.transcribeFile
			audio := beyondAudio(k, chat)
			ref := adapters.FileRef{ID: exchangeFileID(k), Name: "voice.ogg", MediaType: "audio/ogg", Size: int64(len(audio)), Seconds: 3}
			if err := sp.CheckLimits(ref.Size, ref.Seconds); err != nil {
				return err
			}
			data, _, err := fetcher.Fetch(ctx, ref, sp.MaxBytes())
			if err != nil {
				return err
			}
			text, err := sp.Transcribe(ctx, data, ref.Name, ref.MediaType)
			if err == nil && text != beyondText(k, chat) {
				err = fmt.Errorf("transcribed %q, want %q", text, beyondText(k, chat))
			}
			return err
		case "transcription": // as gateway.transcribeFile, given the audio
			audio := beyondAudio(k, chat)
			if err := sp.CheckLimits(int64(len(audio)), 3); err != nil {
				return err
			}
			text, err := sp.Transcribe(ctx, audio, "voice.ogg", "audio/ogg")
			if err == nil && text != beyondText(k, chat) {
				err = fmt.Errorf("transcribed %q, want %q", text, beyondText(k, chat))
			}
			return err
		case "speak": // as gateway.(*Sender).deliverVoice
			audio, typ, err := sp.Synthesize(ctx, c.Text)
			if err != nil {
				return err
			}
			_, err = sender.SendFile(ctx, adapters.Outbound{Adapter: "tg-main", ChatID: chatID, ReplyTo: "1",
				File: &adapters.File{Name: "reply.ogg", MediaType: typ, Data: audio, Voice: true}})
			return err
		case "send":
			_, err := tg.Send(ctx, adapters.Outbound{Adapter: "tg-main", ChatID: chatID, ReplyTo: "1", Text: c.Text})
			return err
		}
		return fmt.Errorf("unknown kind %q", c.Kind)
	}
	// PARLEY_TEST_EXCHANGES_PACE=DURATION makes each of the process's
	// callers wait that long before each exchange, as the daemon's calls
	// come one at a time between other work rather than back to back (the
	// wait's own CPU then counts too).
	pace, _ := time.ParseDuration(os.Getenv("PARLEY_TEST_EXCHANGES_PACE"))
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var c exchangeCommand
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		before, err := procCPU("self")
		if err != nil {
			cancel()
			return err
		}
		var (
			next    atomic.Int64
			wg      sync.WaitGroup
			errOnce sync.Once
			failure error
		)
		for range beyondChats {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < c.N; i = int(next.Add(1)) - 1 {
					if pace > 0 {
						time.Sleep(pace)
					}
					if err := one(ctx, c, c.First+i); err != nil {
						errOnce.Do(func() { failure = err })
						return
					}
				}
			}()
		}
		wg.Wait()
		after, err := procCPU("self")
		cancel()
		if err != nil {
			return err
		}
		res := exchangeResult{CPU: after - before}
		if failure != nil {
			res.Error = failure.Error()
		}
		if err := out.Encode(res); err != nil {
			return err
		}
	}
	return in.Err()
}
