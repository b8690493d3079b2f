package acpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/parleyd/parley/acpserve"
	"github.com/parleyd/parley/acpserve/acptest"
	"github.com/parleyd/parley/client"
)

// fakeAPI is parley's API as acpserve uses it, for one session "s1": a
// prompt's run streams a tool call that asks for permission, waits for
// the answer (or, with failTurn, fails), and replies.
type fakeAPI struct {
	t        *testing.T
	choices  []string
	failTurn string
	// silent streams the turn's start, then nothing (no ping either).
	silent bool
	// stoppedElsewhere ends the turn aborted, as /stop in a chat does.
	stoppedElsewhere bool

	mu       sync.Mutex
	answers  []string
	answered chan string
	aborts   int
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer tok" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	refuse := func(status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "x", "message": msg}})
	}
	switch {
	case r.Method == "GET" && r.URL.Path == "/v1/sessions/s1":
		fmt.Fprint(w, `{"id":"s1"}`)
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/sessions/") && !strings.Contains(r.URL.Path[len("/v1/sessions/"):], "/"):
		refuse(http.StatusNotFound, "no such session")
	case r.Method == "POST" && r.URL.Path == "/v1/sessions/s1/messages":
		fmt.Fprint(w, `{"run_id":"r1","session_id":"s1"}`)
	case r.Method == "POST" && r.URL.Path == "/v1/sessions/s1/abort":
		f.mu.Lock()
		f.aborts++
		f.mu.Unlock()
		fmt.Fprint(w, `{"aborted":true}`)
	case r.Method == "POST" && r.URL.Path == "/v1/sessions/s1/permissions/q1":
		var body struct {
			Answer string `json:"answer"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.answers = append(f.answers, body.Answer)
		f.mu.Unlock()
		f.answered <- body.Answer
		fmt.Fprint(w, `{"answer":"`+body.Answer+`"}`)
	case r.Method == "GET" && r.URL.Path == "/v1/sessions/s1/events":
		f.events(w, r)
	default:
		refuse(http.StatusNotFound, "no such route "+r.Method+" "+r.URL.Path)
	}
}

// events is the run's event stream.
func (f *fakeAPI) events(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(typ string, data any) {
		b, _ := json.Marshal(map[string]any{"type": typ, "run_id": "r1", "session_id": "s1", "data": data})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	send("turn.started", map[string]any{"agent_id": "default", "model": "echo", "run_ids": []string{"r1"}})
	if f.silent {
		<-r.Context().Done()
		return
	}
	if f.failTurn != "" {
		send("turn.finished", map[string]any{"error": f.failTurn, "aborted": false, "steps": 1})
		return
	}
	if f.stoppedElsewhere {
		send("message.delta", map[string]any{"text": "half an ans"})
		send("turn.finished", map[string]any{"aborted": true, "steps": 1})
		return
	}
	send("tool.started", map[string]any{"call_id": "call_9", "name": "kv_set", "state": "input-available"})
	send("permission.requested", map[string]any{"request_id": "q1", "tool": "kv_set", "arguments": map[string]any{"key": "k"}, "choices": f.choices})
	var answer string
	select {
	case answer = <-f.answered:
	case <-r.Context().Done():
		return
	}
	send("permission.resolved", map[string]any{"request_id": "q1", "answer": answer})
	state, result := "output-available", "stored k"
	if answer == "deny" {
		state, result = "output-error", "permission denied"
	}
	send("tool.completed", map[string]any{"call_id": "call_9", "name": "kv_set", "state": state, "result": result})
	send("message.delta", map[string]any{"text": "done: " + answer})
	send("turn.finished", map[string]any{"aborted": false, "steps": 2})
}

// editor answers permission requests as told and records updates.
type editor struct {
	acptest.NoFilesNoTerminals
	answer func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome

	mu      sync.Mutex
	asked   []acp.RequestPermissionRequest
	updates []string
}

func (e *editor) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	u := n.Update
	line := "other"
	switch {
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
		line = "agent: " + u.AgentMessageChunk.Content.Text.Text
	case u.ToolCall != nil:
		line = fmt.Sprintf("tool_call %s %s %s", u.ToolCall.ToolCallId, u.ToolCall.Title, u.ToolCall.Status)
	case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
		line = fmt.Sprintf("tool_call_update %s %s", u.ToolCallUpdate.ToolCallId, *u.ToolCallUpdate.Status)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.updates = append(e.updates, line)
	return nil
}

func (e *editor) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	e.mu.Lock()
	e.asked = append(e.asked, p)
	e.mu.Unlock()
	return acp.RequestPermissionResponse{Outcome: e.answer(p)}, nil
}

// connect serves acpserve over pipes to an editor, against the API at
// base; the serving ends when the test does.
func connect(t *testing.T, base string, ed *editor) *acp.ClientSideConnection {
	t.Helper()
	return connectWith(t, acpserve.Options{Client: &client.Client{Base: base, Token: "tok"}, Version: "test"}, ed)
}

func connectWith(t *testing.T, opts acpserve.Options, ed *editor) *acp.ClientSideConnection {
	t.Helper()
	toAgentR, toAgentW := io.Pipe()
	toEditorR, toEditorW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- acpserve.Serve(ctx, opts, toAgentR, toEditorW)
	}()
	t.Cleanup(func() {
		cancel()
		toAgentW.Close()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		toEditorW.Close()
	})
	conn := acp.NewClientSideConnection(ed, toAgentW, toEditorR)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	return conn
}

// Each way an editor can answer a permission request becomes parley's
// answer: the option chosen when parley offered it, else deny (a cancelled
// request, an option parley didn't offer). The request is shown on the
// tool call that asks, with parley's choices as options of the right
// kinds, and the call's update and the reply follow the answer.
func TestPermissionAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		choices []string
		outcome func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome
		want    string
		status  string
	}{
		{"allow once", []string{"once", "session", "always", "deny"}, selected("once"), "once", "completed"},
		{"always in this chat", []string{"once", "session", "always", "deny"}, selected("session"), "session", "completed"},
		{"reject", []string{"once", "session", "always", "deny"}, selected("deny"), "deny", "failed"},
		{"cancelled by the editor", []string{"once", "deny"}, func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
			return acp.NewRequestPermissionOutcomeCancelled()
		}, "deny", "failed"},
		{"an option not offered", []string{"once", "deny"}, selected("always"), "deny", "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeAPI{t: t, choices: tc.choices, answered: make(chan string, 1)}
			hs := httptest.NewServer(api)
			defer hs.Close()
			ed := &editor{answer: tc.outcome}
			conn := connect(t, hs.URL, ed)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: "s1", Cwd: "/work"}); err != nil {
				t.Fatal(err)
			}
			res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: "s1", Prompt: []acp.ContentBlock{acp.TextBlock("store k")}})
			if err != nil || res.StopReason != acp.StopReasonEndTurn {
				t.Fatalf("prompt: %+v, %v", res, err)
			}
			api.mu.Lock()
			answers := api.answers
			api.mu.Unlock()
			if strings.Join(answers, ",") != tc.want {
				t.Fatalf("parley was answered %q, want %q", answers, tc.want)
			}
			ed.mu.Lock()
			defer ed.mu.Unlock()
			if len(ed.asked) != 1 {
				t.Fatalf("asked %d times", len(ed.asked))
			}
			q := ed.asked[0]
			var opts []string
			for _, o := range q.Options {
				opts = append(opts, string(o.OptionId)+":"+string(o.Kind)+":"+o.Name)
			}
			wantOpts := map[string]string{"once": "once:allow_once:Allow once", "session": "session:allow_always:Always in this chat",
				"always": "always:allow_always:Always", "deny": "deny:reject_once:Deny"}
			var want []string
			for _, c := range tc.choices {
				want = append(want, wantOpts[c])
			}
			if q.ToolCall.ToolCallId != "call_9" || strings.Join(opts, ",") != strings.Join(want, ",") {
				t.Fatalf("the request: call %s, options %v, want %v", q.ToolCall.ToolCallId, opts, want)
			}
			wantUpdates := "tool_call call_9 kv_set in_progress|tool_call_update call_9 " + tc.status + "|agent: done: " + tc.want
			if got := strings.Join(ed.updates, "|"); got != wantUpdates {
				t.Fatalf("updates %q, want %q", got, wantUpdates)
			}
		})
	}
}

func selected(id string) func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
	return func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
		return acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(id))
	}
}

// A turn that fails is a JSON-RPC error saying why, not an end_turn; a
// session parley doesn't have is refused by session/resume, naming it.
func TestFailedTurnAndUnknownSession(t *testing.T) {
	api := &fakeAPI{t: t, failTurn: "the model is not configured", answered: make(chan string, 1)}
	hs := httptest.NewServer(api)
	defer hs.Close()
	conn := connect(t, hs.URL, &editor{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: "s2", Cwd: "/work"})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, `no session "s2"`) {
		t.Fatalf("resume of an unknown session: %v", err)
	}
	if _, err := conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: "s1", Cwd: "/work"}); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Prompt(ctx, acp.PromptRequest{SessionId: "s1", Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	if !errors.As(err, &re) || re.Code != -32603 || !strings.Contains(re.Message, "the turn failed: the model is not configured") {
		t.Fatalf("a failed turn answered %v", err)
	}
}

// Each kind of content block: text and resource links are the message,
// anything else is refused naming the block and what to send.
func TestPromptBlocks(t *testing.T) {
	api := &fakeAPI{t: t, failTurn: "unused", answered: make(chan string, 1)}
	hs := httptest.NewServer(api)
	defer hs.Close()
	conn := connect(t, hs.URL, &editor{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: "s1", Cwd: "/work"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		blocks []acp.ContentBlock
		want   string // in the error; "" for a prompt taken
	}{
		{"text and a link", []acp.ContentBlock{acp.TextBlock("look at"), acp.ResourceLinkBlock("main.go", "file:///work/main.go")}, ""},
		{"no blocks", nil, "prompt is required"}, // the SDK's own check
		{"an image", []acp.ContentBlock{acp.ImageBlock("aGk=", "image/png")}, "prompt[0] is an image"},
		{"audio", []acp.ContentBlock{acp.TextBlock("hear"), acp.AudioBlock("aGk=", "audio/wav")}, "prompt[1] is audio"},
		{"an embedded resource", []acp.ContentBlock{acp.ResourceBlock(acp.EmbeddedResourceResource{
			TextResourceContents: &acp.TextResourceContents{Uri: "file:///a", Text: "x"}})}, "prompt[0] is an embedded resource"},
		{"blank text", []acp.ContentBlock{acp.TextBlock(" \n ")}, "no text"},
		{"a NUL byte", []acp.ContentBlock{acp.TextBlock("a\x00b")}, "NUL byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: "s1", Prompt: tc.blocks})
			var re *acp.RequestError
			if tc.want == "" {
				// Taken: the fake's turn then fails, as scripted.
				if !errors.As(err, &re) || !strings.Contains(re.Message, "the turn failed: unused") {
					t.Fatalf("the prompt was not taken: %v", err)
				}
				return
			}
			if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid-params error saying %q", err, tc.want)
			}
		})
	}
}

// A run's event stream that goes silent (not even a ping) is lost: the
// prompt fails saying so and where the reply will be, rather than waiting
// for ever.
func TestSilentStreamEndsThePrompt(t *testing.T) {
	api := &fakeAPI{t: t, silent: true, answered: make(chan string, 1)}
	hs := httptest.NewServer(api)
	defer hs.Close()
	opts := acpserve.WithStreamIdle(acpserve.Options{Client: &client.Client{Base: hs.URL, Token: "tok"}}, 300*time.Millisecond)
	conn := connectWith(t, opts, &editor{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: "s1", Cwd: "/work"}); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: "s1", Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32603 || !strings.Contains(re.Message, "sent nothing for 300ms") ||
		!strings.Contains(re.Message, "session/load shows its reply") {
		t.Fatalf("a silent stream answered %v", err)
	}
}

// A turn stopped elsewhere (/stop in a chat, the API's abort) answers the
// prompt stopReason cancelled, not end_turn.
func TestTurnStoppedElsewhereIsCancelled(t *testing.T) {
	api := &fakeAPI{t: t, stoppedElsewhere: true, answered: make(chan string, 1)}
	hs := httptest.NewServer(api)
	defer hs.Close()
	conn := connect(t, hs.URL, &editor{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: "s1", Cwd: "/work"}); err != nil {
		t.Fatal(err)
	}
	res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: "s1", Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	if err != nil || res.StopReason != acp.StopReasonCancelled {
		t.Fatalf("a turn stopped elsewhere answered %+v, %v; want stopReason cancelled", res, err)
	}
}
