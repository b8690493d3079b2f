package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/parleyd/parley/acpserve/acptest"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/internal/syncbuf"
	"github.com/parleyd/parley/llm/llmtest"
)

// acpEditor is an editor's side of ACP, the SDK's client: it records
// every session/update as a line of text and answers permission requests
// with the option it is told to.
type acpEditor struct {
	acptest.NoFilesNoTerminals
	mu      sync.Mutex
	updates map[acp.SessionId][]string
	asked   []acp.RequestPermissionRequest
	// choose is the option id a permission request is answered with.
	choose acp.PermissionOptionId
}

var _ acp.Client = (*acpEditor)(nil)

func (e *acpEditor) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	u := n.Update
	var line string
	switch {
	case u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil:
		line = "user: " + u.UserMessageChunk.Content.Text.Text
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
		line = "agent: " + u.AgentMessageChunk.Content.Text.Text
	case u.ToolCall != nil:
		line = fmt.Sprintf("tool_call %s %s %s", u.ToolCall.ToolCallId, u.ToolCall.Title, u.ToolCall.Status)
	case u.ToolCallUpdate != nil:
		status := ""
		if u.ToolCallUpdate.Status != nil {
			status = string(*u.ToolCallUpdate.Status)
		}
		text := ""
		for _, c := range u.ToolCallUpdate.Content {
			if c.Content != nil && c.Content.Content.Text != nil {
				text += c.Content.Content.Text.Text
			}
		}
		line = fmt.Sprintf("tool_call_update %s %s %s", u.ToolCallUpdate.ToolCallId, status, text)
	default:
		line = "other"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.updates == nil {
		e.updates = map[acp.SessionId][]string{}
	}
	e.updates[n.SessionId] = append(e.updates[n.SessionId], line)
	return nil
}

// take returns the updates recorded for id and forgets them.
func (e *acpEditor) take(id acp.SessionId) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.updates[id]
	delete(e.updates, id)
	return out
}

func (e *acpEditor) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked = append(e.asked, p)
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(e.choose)}, nil
}

// acpProcess is `parley acp` run as a process of its own, with an
// editor's connection to it.
type acpProcess struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncbuf.Buffer
	conn   *acp.ClientSideConnection
}

func startACP(t *testing.T, ed *acpEditor, args ...string) *acpProcess {
	t.Helper()
	cmd := parleyCommand(append([]string{"acp"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &acpProcess{t: t, cmd: cmd, stdin: stdin, stderr: &syncbuf.Buffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	p.conn = acp.NewClientSideConnection(ed, stdin, stdout)
	p.conn.SetLogger(slog.New(slog.DiscardHandler))
	return p
}

// stop closes the process's standard input, as an editor that leaves
// does, and waits for it to end by itself.
func (p *acpProcess) stop() {
	p.t.Helper()
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Fatalf("parley acp ended with %v; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		p.t.Fatalf("parley acp didn't end after its input closed; stderr:\n%s", p.stderr)
	}
}

// wantRPCError checks that err is a JSON-RPC error with code whose
// message holds each of want.
func wantRPCError(t *testing.T, what string, err error, code int, want ...string) {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("%s: got %v, want a JSON-RPC error", what, err)
	}
	if re.Code != code {
		t.Errorf("%s: code %d (%s), want %d", what, re.Code, re.Message, code)
	}
	for _, w := range want {
		if !strings.Contains(re.Message, w) {
			t.Errorf("%s: the message %q doesn't say %q", what, re.Message, w)
		}
	}
}

func textPrompt(id acp.SessionId, text string) acp.PromptRequest {
	return acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock(text)}}
}

// parley acp, run by an editor as a process of its own and driven with the
// SDK's client over its standard input and output, in process on the
// config's database: initialize says what it can do; session/new makes a
// parley session; a prompt streams the reply (from a model at the wire)
// as agent_message_chunk updates and ends the turn; a tool whose rule says
// ask is asked about with session/request_permission, and the option
// chosen lets it run (a tool_call, its completed update, then the reply
// reading its result); a second prompt while one runs is refused, and
// session/cancel stops the slow one (stopReason cancelled, its reply never
// written); after a restart, session/load replays the whole history in
// order, session/resume rejoins without replay, and session/close forgets
// the session on the connection. Bad input is a JSON-RPC error naming
// what to change.
// Both engines: on SQLite, and on PostgreSQL when PARLEY_TEST_POSTGRES_URL
// is set.
func TestACPOverStdio(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			model := llmtest.NewOpenAIEcho(t, 1500*time.Millisecond)
			model.CallTool("look up plans", "memory_search", `{"query":"plans"}`)
			extra := "gateway:\n  debounce: 0s\n" + model.ConfigYAML() +
				"agents:\n  - id: default\n    model: openai/gpt-test\n    tools: [memory_search]\n    permissions:\n      - tool: memory_search\n        action: ask\n"
			var path string
			if engine == "sqlite" {
				path, _ = writeConfig(t, extra)
			} else {
				path = filepath.Join(t.TempDir(), "parley.yaml")
				if err := os.WriteFile(path, []byte("database:\n  url: \""+dbtest.PostgresURL(t)+"\"\n"+extra), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			acpConversation(t, model, path)
		})
	}
}

// acpConversation is TestACPOverStdio on the config at path, whose agent
// runs on model.
func acpConversation(t *testing.T, model *llmtest.OpenAIEcho, path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ed := &acpEditor{choose: "once"}
	p := startACP(t, ed, "--config", path)

	init, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatalf("initialize: %v; stderr:\n%s", err, p.stderr)
	}
	caps := init.AgentCapabilities
	if init.ProtocolVersion != acp.ProtocolVersionNumber || !caps.LoadSession || caps.SessionCapabilities.Resume == nil ||
		caps.SessionCapabilities.Close == nil || caps.PromptCapabilities.Image || init.AgentInfo == nil || init.AgentInfo.Name != "parley" {
		t.Fatalf("initialize answered %+v", init)
	}

	cwd := t.TempDir()
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v; stderr:\n%s", err, p.stderr)
	}
	sid := sess.SessionId
	if len(sid) != 36 {
		t.Fatalf("session/new gave %q, not a parley session id", sid)
	}

	// A prompt: the reply streams, then the turn ends.
	res, err := p.conn.Prompt(ctx, textPrompt(sid, "hello from the editor"))
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v; stderr:\n%s", res, err, p.stderr)
	}
	if got := strings.Join(ed.take(sid), "|"); got != "agent: hello from the editor" {
		t.Fatalf("the prompt's updates: %q", got)
	}

	// A tool that asks: the editor is asked, allows it once, and the
	// tool runs.
	res, err = p.conn.Prompt(ctx, textPrompt(sid, "look up plans"))
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt with a tool: %+v, %v; stderr:\n%s", res, err, p.stderr)
	}
	ed.mu.Lock()
	asked := ed.asked
	ed.mu.Unlock()
	if len(asked) != 1 {
		t.Fatalf("the editor was asked %d times, want once", len(asked))
	}
	q := asked[0]
	var options []string
	for _, o := range q.Options {
		options = append(options, fmt.Sprintf("%s:%s", o.OptionId, o.Kind))
	}
	if q.SessionId != sid || q.ToolCall.ToolCallId != "call_1" || q.ToolCall.Title == nil || *q.ToolCall.Title != "memory_search" ||
		strings.Join(options, ",") != "once:allow_once,session:allow_always,always:allow_always,deny:reject_once" {
		t.Fatalf("the permission request: %+v, options %v", q, options)
	}
	var results []string
	for _, r := range model.Requests() {
		if r.Tool != "" {
			results = append(results, r.Tool)
		}
	}
	if len(results) != 1 || strings.Contains(results[0], "permission") {
		t.Fatalf("the model read the tool results %q, want the tool's own", results)
	}
	want := []string{"tool_call call_1 memory_search in_progress", "tool_call_update call_1 completed " + results[0],
		"agent: tool said: " + results[0]}
	if got := ed.take(sid); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the tool prompt's updates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Bad input changes nothing and says what to change.
	_, err = p.conn.Prompt(ctx, textPrompt("01a00000-0000-7000-8000-000000000000", "hi"))
	wantRPCError(t, "a prompt to a session not open", err, -32602, "not open on this connection", "session/load")
	_, err = p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("see"), acp.ImageBlock("aGk=", "image/png")}})
	wantRPCError(t, "an image in the prompt", err, -32602, "prompt[1] is an image", "send text blocks")
	_, err = p.conn.Prompt(ctx, textPrompt(sid, "   "))
	wantRPCError(t, "a prompt without text", err, -32602, "no text")
	_, err = p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "relative/dir", McpServers: []acp.McpServer{}})
	wantRPCError(t, "a relative cwd", err, -32602, "not an absolute path")
	_, err = p.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "no-such-session", Cwd: cwd, McpServers: []acp.McpServer{}})
	wantRPCError(t, "loading a session parley doesn't have", err, -32602, `no session "no-such-session"`, "session/new")
	_, err = p.conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: "no-such-session"})
	wantRPCError(t, "closing a session not open", err, -32602, "not open on this connection")
	if got := ed.take(sid); len(got) != 0 {
		t.Fatalf("bad input sent updates: %q", got)
	}

	// A slow turn: a second prompt meanwhile is refused, and
	// session/cancel stops it.
	calls := model.Calls.Load()
	slow := make(chan struct {
		res acp.PromptResponse
		err error
	}, 1)
	go func() {
		res, err := p.conn.Prompt(ctx, textPrompt(sid, "a slow one"))
		slow <- struct {
			res acp.PromptResponse
			err error
		}{res, err}
	}()
	for deadline := time.Now().Add(20 * time.Second); model.Calls.Load() == calls; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the slow prompt never reached the model; stderr:\n%s", p.stderr)
		}
	}
	_, err = p.conn.Prompt(ctx, textPrompt(sid, "meanwhile"))
	wantRPCError(t, "a prompt while one runs", err, -32602, "already runs", "session/cancel")
	if err := p.conn.Cancel(ctx, acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-slow:
		if r.err != nil || r.res.StopReason != acp.StopReasonCancelled {
			t.Fatalf("the cancelled prompt answered %+v, %v", r.res, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the cancelled prompt never answered; stderr:\n%s", p.stderr)
	}
	if got := ed.take(sid); strings.Contains(strings.Join(got, "|"), "agent: a slow one") {
		t.Fatalf("the cancelled turn still replied: %q", got)
	}

	if _, err := p.conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: sid}); err != nil {
		t.Fatalf("session/close: %v", err)
	}
	_, err = p.conn.Prompt(ctx, textPrompt(sid, "after close"))
	wantRPCError(t, "a prompt after close", err, -32602, "not open on this connection")
	p.stop()

	// A new process: session/load replays the history, in order.
	ed = &acpEditor{choose: "deny"}
	p = startACP(t, ed, "--config", path)
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize again: %v; stderr:\n%s", err, p.stderr)
	}
	if _, err := p.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sid, Cwd: cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v; stderr:\n%s", err, p.stderr)
	}
	want = []string{"user: hello from the editor", "agent: hello from the editor",
		"user: look up plans", "tool_call call_1 memory_search pending", "tool_call_update call_1 completed " + results[0], "agent: tool said: " + results[0],
		"user: a slow one"}
	got := ed.take(sid)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("session/load replayed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// session/resume rejoins without a replay; an unknown id is refused.
	if _, err := p.conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: sid, Cwd: cwd}); err != nil {
		t.Fatalf("session/resume: %v", err)
	}
	if got := ed.take(sid); len(got) != 0 {
		t.Fatalf("session/resume replayed %q", got)
	}
	_, err = p.conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: "", Cwd: cwd})
	wantRPCError(t, "resuming without an id", err, -32602, "sessionId is missing")
	// The loaded session takes prompts again.
	res, err = p.conn.Prompt(ctx, textPrompt(sid, "back again"))
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt after load: %+v, %v; stderr:\n%s", res, err, p.stderr)
	}
	if got := strings.Join(ed.take(sid), "|"); got != "agent: back again" {
		t.Fatalf("the prompt after load streamed %q", got)
	}
	if _, err := p.conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: sid}); err != nil {
		t.Fatalf("session/close: %v", err)
	}
	p.stop()
	if strings.Contains(p.stderr.String(), "sk-test-fake-key") {
		t.Fatalf("the provider key reached the log:\n%s", p.stderr)
	}
}

// agentText is the reply the updates stream, its chunks joined.
func agentText(updates []string) string {
	var b strings.Builder
	for _, u := range updates {
		if text, ok := strings.CutPrefix(u, "agent: "); ok {
			b.WriteString(text)
		}
	}
	return b.String()
}

// parley acp beside a running daemon talks to it through its HTTP API
// (the run file says where): the session is the daemon's, the offline echo
// model's reply streams word by word, and a second parley acp loads the
// session from the daemon. A wrong token is refused with what to do; an
// --agent the config doesn't have stops parley acp in process before it
// serves, and beside the daemon is refused by session/new.
func TestACPBesideARunningDaemon(t *testing.T) {
	addr := freeAddr(t)
	path, dbPath := writeConfig(t, "gateway:\n  debounce: 0s\nhttp:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	code, _, errOut := parley(t, ctx, "acp", "--config", path, "--agent", "nobody")
	if code == 0 || !strings.Contains(errOut, `--agent "nobody" is not an agent of this config; the agents are default`) {
		t.Fatalf("an unknown --agent: exit %d, %q", code, errOut)
	}

	runDaemon(t, ctx, path, dbPath)

	ed := &acpEditor{}
	p := startACP(t, ed, "--config", path)
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize: %v; stderr:\n%s", err, p.stderr)
	}
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v; stderr:\n%s", err, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "passing ACP sessions to its API at http://"+addr) {
		t.Fatalf("parley acp did not go through the daemon: %s", p.stderr)
	}
	res, err := p.conn.Prompt(ctx, textPrompt(sess.SessionId, "one two three"))
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v; stderr:\n%s", res, err, p.stderr)
	}
	got := ed.take(sess.SessionId)
	if agentText(got) != "one two three" || len(got) < 2 {
		t.Fatalf("the reply streamed as %q, want the echo in several chunks", got)
	}
	p.stop()

	ed = &acpEditor{}
	p = startACP(t, ed, "--config", path)
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sess.SessionId, Cwd: t.TempDir(), McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v; stderr:\n%s", err, p.stderr)
	}
	if got := strings.Join(ed.take(sess.SessionId), "|"); got != "user: one two three|agent: one two three" {
		t.Fatalf("session/load replayed %q", got)
	}
	p.stop()

	// An agent the daemon doesn't have: session/new says so.
	ed = &acpEditor{}
	p = startACP(t, ed, "--config", path, "--agent", "nobody")
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	_, err = p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	wantRPCError(t, "an agent the daemon doesn't have", err, -32602, `unknown agent "nobody"`, "--agent")
	p.stop()

	// A token the daemon doesn't have: each call says what to pass.
	ed = &acpEditor{}
	p = startACP(t, ed, "--config", path, "--token", "not-a-token-of-this-daemon")
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	_, err = p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	wantRPCError(t, "a wrong token", err, -32603, "refused the token", "--token")
	p.stop()
	if strings.Contains(p.stderr.String(), "not-a-token-of-this-daemon") {
		t.Fatalf("the token reached the log:\n%s", p.stderr)
	}
}

// parley acp --harness starts the editor's sessions on that harness: its
// prompt and its capabilities' tools reach the model. A harness the
// config doesn't have stops parley acp before it serves, naming the ones
// it has.
func TestACPOnAHarness(t *testing.T) {
	model := llmtest.NewOpenAIEcho(t, 0)
	path, _ := writeConfig(t, "gateway:\n  debounce: 0s\n"+model.ConfigYAML()+
		"agents:\n  - id: default\n    model: openai/gpt-test\n"+
		"harnesses:\n  - id: notebook\n    prompt: NOTEBOOK-HARNESS\n    capabilities: [sql]\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	code, _, errOut := parley(t, ctx, "acp", "--config", path, "--harness", "diary")
	if code == 0 || !strings.Contains(errOut, `--harness "diary" is not a harness of this config; its harnesses are notebook`) {
		t.Fatalf("an unknown --harness: exit %d, %q", code, errOut)
	}

	ed := &acpEditor{}
	p := startACP(t, ed, "--config", path, "--harness", "notebook")
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize: %v; stderr:\n%s", err, p.stderr)
	}
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v; stderr:\n%s", err, p.stderr)
	}
	if res, err := p.conn.Prompt(ctx, textPrompt(sess.SessionId, "start a reading list")); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v; stderr:\n%s", res, err, p.stderr)
	}
	p.stop()
	reqs := model.Requests()
	if len(reqs) == 0 || !strings.HasPrefix(reqs[0].System, "NOTEBOOK-HARNESS") || !slices.Contains(reqs[0].Tools, "sql_exec") {
		t.Fatalf("the model was asked %+v; want the notebook harness's prompt and its sql tools", reqs)
	}
}

// parley acp --harness beside a running daemon passes the harness to the
// daemon's API: the editor's sessions run on the daemon's harness, and a
// harness the daemon doesn't have is session/new's refusal, saying to
// pass another --harness.
func TestACPOnAHarnessBesideARunningDaemon(t *testing.T) {
	model := llmtest.NewOpenAIEcho(t, 0)
	addr := freeAddr(t)
	path, dbPath := writeConfig(t, "gateway:\n  debounce: 0s\nhttp:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n"+model.ConfigYAML()+
		"agents:\n  - id: default\n    model: openai/gpt-test\n"+
		"harnesses:\n  - id: notebook\n    prompt: NOTEBOOK-HARNESS\n    capabilities: [sql]\n")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	runDaemon(t, ctx, path, dbPath)

	ed := &acpEditor{}
	p := startACP(t, ed, "--config", path, "--harness", "notebook")
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize: %v; stderr:\n%s", err, p.stderr)
	}
	sess, err := p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v; stderr:\n%s", err, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "passing ACP sessions to its API at http://"+addr) {
		t.Fatalf("parley acp did not go through the daemon: %s", p.stderr)
	}
	if res, err := p.conn.Prompt(ctx, textPrompt(sess.SessionId, "start a reading list")); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v; stderr:\n%s", res, err, p.stderr)
	}
	p.stop()
	reqs := model.Requests()
	if len(reqs) == 0 || !strings.HasPrefix(reqs[0].System, "NOTEBOOK-HARNESS") || !slices.Contains(reqs[0].Tools, "sql_exec") {
		t.Fatalf("the model was asked %+v; want the notebook harness's prompt and its sql tools", reqs)
	}

	// A harness the daemon doesn't have: session/new says so.
	ed = &acpEditor{}
	p = startACP(t, ed, "--config", path, "--harness", "diary")
	if _, err := p.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	_, err = p.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	wantRPCError(t, "a harness the daemon doesn't have", err, -32602, `unknown harness "diary"`, "--harness")
	p.stop()
}
