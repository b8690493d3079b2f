package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// parley run says at info what it started, one line each, and, with no
// channel and no token, what the operator can do next; its start line
// says the web chat and the dashboard are off, not where they would be.
func TestRunSaysWhatItStarted(t *testing.T) {
	addr := freeAddr(t)
	path, _ := writeConfig(t, "http:\n  listen: "+addr+"\ncron:\n  jobs:\n    - id: nightly\n      schedule: \"0 3 * * *\"\n      prompt: report\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out syncWriter
	out.w = &bytes.Buffer{}
	go func() { done <- run(ctx, []string{"run", "--config", path}, &bytes.Buffer{}, &out) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "parley started") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run: %d\n%s", code, out.String())
	}
	logged := out.String()
	for _, want := range []string{`msg="started database" component=daemon engine=sqlite`, `msg="started outbox sender"`,
		`msg="started memory" component=daemon index=`, `msg="started cron" component=daemon jobs=1`, "no chat channels are configured: run parley chat", "until http.tokens has a token: parley init writes one",
		`web_chat="off (no http.tokens)" dashboard="off (no http.tokens)"`} {
		if !strings.Contains(logged, want) {
			t.Errorf("the log has no %q:\n%s", want, logged)
		}
	}
}
