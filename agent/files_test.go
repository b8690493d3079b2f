package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
)

// A file sent without a caption reaches the model as a line naming it and
// the text read of it, in its own run and in later runs' history; the
// stored message keeps the text as sent and the file as a part.
func TestFilesReachTheModelWithTheirMessage(t *testing.T) {
	m := echo.New()
	e := newEnv(t, m)
	s := e.session(sessions.ChatKey("telegram", "1", "1", "a"))
	note := sessions.FilePart("notes.txt", "text/plain", sessions.FileData{ID: "f1", Size: 5}, "hello")
	odd := sessions.FilePart("song.mp3", "audio/mpeg", sessions.FileData{ID: "f2", Size: 2_500_000, Note: "parley can't read this type of file"}, "")
	want := "[File: notes.txt, text/plain, 5 B]\n--- notes.txt ---\nhello\n--- end of notes.txt ---\n" +
		"[File: song.mp3, audio/mpeg, 2.5 MB; parley can't read this type of file]"
	res, err := e.runner.Run(context.Background(), Request{Session: s, Agent: AgentConfig{ID: "a", Model: "echo"},
		Inputs: []Input{{Parts: []sessions.Part{note, odd}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != want {
		t.Fatalf("the model read %q, want %q", res.Reply, want)
	}
	if _, err := e.runner.Run(context.Background(), Request{Session: s, Agent: AgentConfig{ID: "a", Model: "echo"},
		Inputs: []Input{{Text: "and now?"}}}); err != nil {
		t.Fatal(err)
	}
	reqs := m.Requests()
	if first := reqs[len(reqs)-1].Messages[0]; first.Role != llm.RoleUser || first.Content != want {
		t.Fatalf("a later run's history holds %+v, want the file lines", first)
	}
	stored := e.messages(s.ID)
	// The two files, then the record of what the turn ran with.
	if stored[0].Content != "" || len(stored[0].Parts) != 3 || stored[0].Parts[0].Name != "notes.txt" || stored[0].Parts[0].Text != "hello" ||
		stored[0].Parts[1].Name != "song.mp3" || stored[0].Parts[2].Type != PartTurn {
		t.Fatalf("stored %+v", stored[0])
	}
}

// While the provider can't be reached, the status (which /status shows
// in a chat) says so, without the provider's address.
func TestRetryStatusHidesTheAddress(t *testing.T) {
	unreachable := fmt.Errorf("openai: %w", &url.Error{Op: "Post", URL: "http://10.1.2.3:18599/v1/chat/completions",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}})
	model := echo.New().ThenError(unreachable)
	var seen []Status
	var e *env
	var id sessions.ID
	e = newEnv(t, model, func(o *Options) {
		o.Retry = llm.RetryPolicy{Sleep: func(context.Context, time.Duration) error { seen = append(seen, e.runner.Status(id)); return nil }}
	})
	sess := e.cliSession()
	id = sess.ID
	if _, err := e.run(Request{Session: sess, Inputs: []Input{{Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || !strings.Contains(seen[0].Message, "the provider couldn't be reached") ||
		strings.Contains(seen[0].Message, "10.1.2.3") || strings.Contains(seen[0].Message, "18599") {
		t.Fatalf("status while retrying = %+v", seen)
	}
}

// A user message with files is rendered for the prompt once, then taken
// from the cache by its id (a message never changes); the cache holds at
// most two generations of maxRendered texts.
func TestRenderCache(t *testing.T) {
	var c renderCache
	part := sessions.Part{Type: sessions.PartFile, Name: "voice.ogg", MediaType: "audio/ogg", Data: json.RawMessage(`{"size":2048}`)}
	m := sessions.Message{ID: "m1", Role: sessions.RoleUser, Content: "hi", Parts: []sessions.Part{part}}
	want := userContent(m.Content, m.Parts)
	if got := c.userContent(m); got != want || !strings.Contains(got, "[File: voice.ogg, audio/ogg, 2.0 KB]") {
		t.Fatalf("rendered %q, want %q", got, want)
	}
	changed := m
	changed.Parts = []sessions.Part{{Type: sessions.PartFile, Name: "other.ogg", Data: json.RawMessage(`{}`)}}
	if got := c.userContent(changed); got != want {
		t.Fatalf("the same id rendered again: %q, want the remembered %q", got, want)
	}
	if got := c.userContent(sessions.Message{ID: "m2", Content: "plain"}); got != "plain" || len(c.cur)+len(c.old) != 1 {
		t.Fatalf("a message without files: %q, %d remembered; want it rendered, not kept", got, len(c.cur)+len(c.old))
	}
	// Every stored user message has parts (its turn's settings): without
	// a file among them, it is its text, and nothing is kept.
	settings := sessions.Message{ID: "m3", Content: "plain", Parts: []sessions.Part{{Type: PartTurn, Data: json.RawMessage(`{"model":"echo"}`)}}}
	if got := c.userContent(settings); got != "plain" || got != userContent(settings.Content, settings.Parts) || len(c.cur)+len(c.old) != 1 {
		t.Fatalf("a message with parts but no file: %q, %d remembered; want its text, not kept", got, len(c.cur)+len(c.old))
	}
	// A message read now and then (each turn of its chat) stays remembered
	// however many others pass through; the cache stays within its cap.
	other := m
	for i := range 5 * maxRendered {
		other.ID = sessions.MessageID(fmt.Sprint("id", i))
		c.userContent(other)
		if i%(maxRendered/2) == 0 {
			if got := c.userContent(changed); got != want {
				t.Fatalf("after %d others, m1 rendered again: %q, want the remembered %q", i+1, got, want)
			}
		}
		if n := len(c.cur) + len(c.old); n > 2*maxRendered {
			t.Fatalf("%d texts remembered, past the cap of %d", n, 2*maxRendered)
		}
	}
}
