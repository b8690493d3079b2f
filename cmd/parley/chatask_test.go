package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/llm/llmtest"
)

// typist is a person at `parley chat`: lines typed one at a time, the
// output read as it comes.
type typist struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *syncWriter
	err  *syncWriter
	done chan int
}

func startChat(t *testing.T, ctx context.Context, path string) *typist {
	t.Helper()
	r, w := io.Pipe()
	p := &typist{t: t, in: w, out: &syncWriter{w: &bytes.Buffer{}}, err: &syncWriter{w: &bytes.Buffer{}}, done: make(chan int, 1)}
	go func() { p.done <- runWithInput(ctx, []string{"chat", "--config", path}, r, p.out, p.err) }()
	return p
}

func (p *typist) say(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatalf("type %q: %v", line, err)
	}
}

// wait waits until the output holds want n times.
func (p *typist) wait(want string, n int) {
	p.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); strings.Count(p.out.String(), want) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			p.t.Fatalf("the chat never showed %q (%d times):\n%s\n%s", want, n, p.out.String(), p.err.String())
		}
	}
}

// quit ends the input and waits for the chat to end.
func (p *typist) quit() {
	p.t.Helper()
	p.in.Close()
	select {
	case code := <-p.done:
		if code != 0 {
			p.t.Fatalf("chat exited %d:\n%s\n%s", code, p.out.String(), p.err.String())
		}
	case <-time.After(30 * time.Second):
		p.t.Fatalf("the chat did not end:\n%s", p.out.String())
	}
}

// A tool the agent must ask about is asked in `parley chat`, with its
// choices numbered, in process and beside a running daemon (through the
// API's permission.requested event and route), and the typed number
// answers it: the tool runs and the model reads its result. "Always in
// this chat" answered beside the daemon holds for the next run of parley
// chat, which talks in the same session cli:chat; a wrong number changes
// nothing and asks again.
func TestChatAnswersAPermissionAsk(t *testing.T) {
	model := llmtest.NewOpenAIEcho(t, 0)
	addr := freeAddr(t)
	path, dbPath := writeConfig(t, "http:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n"+model.ConfigYAML()+
		"agents:\n  - id: default\n    model: openai/gpt-test\n    tools: [memory_search]\n    permissions:\n      - tool: memory_search\n        action: ask\n")
	for _, prompt := range []string{"look up plans", "look up again", "and once more"} {
		model.CallTool(prompt, "memory_search", `{"query":"plans"}`)
	}
	ctx := context.Background()
	const question = "The assistant wants to use the tool memory_search with {\"query\":\"plans\"}. Allow it?"
	choices := "1. Allow once\n2. Always in this chat\n3. Always\n4. Deny"
	ran := func(n int) {
		t.Helper()
		var results int
		for _, r := range model.Requests() {
			if r.Tool != "" {
				if strings.Contains(r.Tool, "permission denied") {
					t.Fatalf("the tool was denied: %q", r.Tool)
				}
				results++
			}
		}
		if results != n {
			t.Fatalf("the model read %d tool results, want %d", results, n)
		}
	}

	// In process: the question is a numbered list, answered with 1.
	p := startChat(t, ctx, path)
	p.say("look up plans")
	p.wait(question, 1)
	p.wait(choices, 1)
	ran(0)
	p.say("1")
	p.wait("tool said: ", 1)
	p.quit()
	ran(1)

	d := runDaemon(t, ctx, path, dbPath)

	// Beside the daemon: the question comes over the API; 7 isn't a
	// choice, 2 is "Always in this chat".
	p = startChat(t, ctx, path)
	p.say("look up again")
	p.wait(question, 1)
	p.wait(choices, 1)
	if !strings.Contains(p.err.String(), "talking to it at http://"+addr) {
		t.Fatalf("the chat did not go through the daemon: %s", p.err.String())
	}
	ran(1)
	p.say("7")
	p.wait("Answer with a number from 1 to 4.", 1)
	p.say("2")
	p.wait("Allowed in this chat from now on.", 1)
	p.wait("tool said: ", 1)
	p.quit()
	ran(2)

	// A second run beside the daemon is the same chat: the tool runs
	// unasked.
	p = startChat(t, ctx, path)
	p.say("and once more")
	p.wait("tool said: ", 1)
	p.quit()
	ran(3)
	if strings.Contains(p.out.String(), question) {
		t.Fatalf("asked again in the allowed chat:\n%s", p.out.String())
	}
	d.stop()

	id, show := onlyCLIChat(t, ctx, path)
	for _, want := range []string{"look up plans", "look up again", "and once more"} {
		if !strings.Contains(show, want) {
			t.Fatalf("the cli:chat session (%s) doesn't hold %q:\n%s", id, want, show)
		}
	}
}

// parley chat in process shows the turn's retry while the reply waits,
// on a line of its own, then the reply.
func TestChatShowsARetryInProcess(t *testing.T) {
	model := llmtest.NewOpenAIEcho(t, 0)
	model.FailNext(1, 503)
	path, _ := writeConfig(t, model.ConfigYAML()+"agents:\n  - id: default\n    model: openai/gpt-test\n")
	p := startChat(t, context.Background(), path)
	p.say("are you there")
	p.wait("(retrying, attempt 1", 1)
	p.wait("are you there\n", 1)
	p.quit()
	if out := p.out.String(); strings.Index(out, "(retrying, attempt 1") > strings.Index(out, "are you there\n") {
		t.Fatalf("the retry shows after the reply:\n%s", out)
	}
}
