package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/speech/speechtest"
)

// A spoken reply goes through the outbox like any: the fake speech
// server's audio reaches the fake Bot API with sendVoice exactly once,
// although parley is SIGKILLed after the reply was synthesized and before
// it was sent (its first sendVoice failed), and restarted. A short reply
// goes as the voice note alone.
func TestSpokenReplySentOnceAcrossACrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts parley twice")
	}
	tg := telegramtest.NewServer()
	defer tg.Close()
	sp := speechtest.New(t)
	sp.Audio = []byte("OggS the spoken reply")
	model := llmtest.NewOpenAIEcho(t, 0)
	dir := t.TempDir()
	cfg := "database:\n  url: " + filepath.Join(dir, "data", "parley.db") + "\n" +
		"http:\n  listen: 127.0.0.1:0\n" +
		"gateway:\n  debounce: 0s\n" +
		model.ConfigYAML() +
		"speech:\n  base_url: " + sp.BaseURL() + "\n  api_key: sk-test\n" +
		"agents:\n  - id: default\n    model: openai/gpt-test\n    voice_replies: on\n" +
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n" + indentYAML(tg.ConfigYAML(), "    ")
	path := filepath.Join(dir, "parley.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The first sendVoice fails, so the reply waits for its retry,
	// synthesized and unsent, when parley is killed.
	tg.Fail("sendVoice", telegramtest.Failure{Code: 500, Description: "Internal Server Error"})
	p := runParley(t, tg, path)
	tg.InjectText(77, 77, "say hello")
	if err := tg.WaitFor(ctx, func() bool { return tg.Calls("sendVoice") >= 1 }); err != nil {
		p.fatalf("no sendVoice: %v", err)
	}
	p.kill()
	if got := len(sp.Spoken()); got != 1 {
		t.Fatalf("%d syntheses before the crash, want 1", got)
	}
	if n := len(tg.Files()); n != 0 {
		t.Fatalf("%d files sent before the crash, want none (the send failed)", n)
	}

	p = runParley(t, tg, path)
	sent, err := tg.WaitFiles(ctx, 1)
	if err != nil {
		p.fatalf("the spoken reply never went: %v", err)
	}
	// Give a duplicate the time to show.
	time.Sleep(1500 * time.Millisecond)
	files := tg.Files()
	if len(files) != 1 || files[0].Method != "sendVoice" || string(files[0].Data) != string(sp.Audio) || files[0].ChatID != "77" {
		p.fatalf("files sent %+v, want the speech server's audio once with sendVoice (first %+v)", files, sent[0])
	}
	if spoken := sp.Spoken(); len(spoken) != 2 || spoken[1] != "say hello" {
		p.fatalf("spoken %q, want the reply spoken again after the restart", spoken)
	}
	if n := tg.SentCount(); n != 0 {
		p.fatalf("%d text messages sent; a short spoken reply goes as its voice note alone", n)
	}
	p.stop(20 * time.Second)
}
