package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// assertOrder fails unless every marker occurs in s, in order.
func assertOrder(t *testing.T, s string, markers ...string) {
	t.Helper()
	last := -1
	for _, m := range markers {
		i := strings.Index(s, m)
		if i < 0 {
			t.Fatalf("prompt lacks %q:\n%s", m, s)
		}
		if i <= last {
			t.Fatalf("%q is out of order in:\n%s", m, s)
		}
		last = i
	}
}

func TestBuildSystemPromptOrder(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	p := Prompt{
		Agent: "AGENT-PROMPT", Workspace: "WORKSPACE-RULES", Skills: "SKILL-INDEX",
		Now: testNow, Location: paris, Surface: "telegram", DisplayName: "Alice",
		Tools: []tools.Tool{{Name: "weather", Description: "WEATHER-TOOL"}},
	}
	full := BuildSystemPrompt(p)
	assertOrder(t, full, "AGENT-PROMPT", "WORKSPACE-RULES", "SKILL-INDEX",
		"Friday, 14 March 2025 16:09", "Europe/Paris", "telegram", "Alice", "weather: WEATHER-TOOL")

	p.Minimal = true
	minimal := BuildSystemPrompt(p)
	assertOrder(t, minimal, "AGENT-PROMPT", "Europe/Paris", "weather: WEATHER-TOOL")
	for _, gone := range []string{"WORKSPACE-RULES", "SKILL-INDEX"} {
		if strings.Contains(minimal, gone) {
			t.Errorf("minimal prompt keeps %q", gone)
		}
	}
	if got := BuildSystemPrompt(Prompt{Agent: "only"}); got != "only" {
		t.Errorf("empty sections were not skipped: %q", got)
	}
}

func TestRunAssemblesPrompt(t *testing.T) {
	tests := []struct {
		name    string
		key     sessions.Key
		minimal bool
		want    []string
		absent  []string
	}{
		{"channel full", sessions.ChatKey("telegram", "42", "u1", "a1"), false,
			[]string{"AGENT-PROMPT", "WORKSPACE-RULES", "SKILL-INDEX", "Surface: telegram", "User: Alice", "ping: PING-TOOL"}, nil},
		{"cli has no display name", sessions.CLIKey("u1", "a1"), false,
			[]string{"AGENT-PROMPT", "WORKSPACE-RULES", "SKILL-INDEX", "Surface: cli", "ping: PING-TOOL"}, []string{"Alice"}},
		{"cron is minimal", sessions.CronKey("nightly", testNow, "a1"), false,
			[]string{"AGENT-PROMPT", "Surface: cron", "ping: PING-TOOL"}, []string{"WORKSPACE-RULES", "SKILL-INDEX", "Alice"}},
		{"webhook is minimal", sessions.WebhookKey("gh", testNow, "a1"), false,
			[]string{"AGENT-PROMPT", "Surface: webhook", "ping: PING-TOOL"}, []string{"WORKSPACE-RULES", "SKILL-INDEX"}},
		{"minimal by config", sessions.ChatKey("telegram", "42", "u1", "a1"), true,
			[]string{"AGENT-PROMPT", "Surface: telegram", "User: Alice", "ping: PING-TOOL"}, []string{"WORKSPACE-RULES", "SKILL-INDEX"}},
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, InstructionsFile), []byte("WORKSPACE-RULES"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			model := echo.New()
			e := newEnv(t, model)
			e.register(tools.Tool{Name: "ping", Description: "PING-TOOL", Run: textTool("ping", "pong").Run})
			cfg := AgentConfig{ID: "a1", Prompt: "AGENT-PROMPT", WorkspaceDir: dir, SkillIndex: "SKILL-INDEX",
				Tools: []string{"ping"}, Minimal: tc.minimal}
			if _, err := e.run(Request{Session: e.session(tc.key), Agent: cfg, Inputs: []Input{{Text: "hi", DisplayName: "Alice"}}}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			system := model.Requests()[0].System
			assertOrder(t, system, tc.want...)
			for _, a := range tc.absent {
				if strings.Contains(system, a) {
					t.Errorf("prompt contains %q:\n%s", a, system)
				}
			}
		})
	}
}

func TestMissingWorkspaceFileIsFine(t *testing.T) {
	model := echo.New()
	e := newEnv(t, model)
	cfg := AgentConfig{Prompt: "AGENT-PROMPT", WorkspaceDir: t.TempDir()}
	if _, err := e.run(Request{Session: e.cliSession(), Agent: cfg, Inputs: []Input{{Text: "hi"}}}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if s := model.Requests()[0].System; strings.Contains(s, "Workspace instructions") || !strings.Contains(s, "AGENT-PROMPT") {
		t.Errorf("system = %q", s)
	}
}

func TestHistoryIsCappedByTurns(t *testing.T) {
	model := echo.New()
	e := newEnv(t, model)
	sess := e.cliSession()
	ctx := t.Context()
	seed := []sessions.Message{
		{Role: sessions.RoleUser, Content: "turn1"},
		{Role: sessions.RoleAssistant, Content: "reply1"},
		{Role: sessions.RoleSystem, Content: "SUMMARY", Summary: true},
		{Role: sessions.RoleSystem, Content: "a note", Synthetic: true},
		{Role: sessions.RoleUser, Content: "turn2"},
		{Role: sessions.RoleAssistant, ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "ping", Arguments: json.RawMessage(`{}`)}}},
		{Role: sessions.RoleTool, ToolCallID: "c1", Content: "pong"},
		{Role: sessions.RoleAssistant, Content: "reply2"},
		{Role: sessions.RoleUser, Content: "turn3"},
		{Role: sessions.RoleAssistant, Content: "reply3"},
	}
	for _, m := range seed {
		if _, err := e.store.Append(ctx, sess.ID, m); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		turns int
		want  []string
	}{
		{4, []string{"user:turn1", "assistant:reply1", "system:SUMMARY", "user:turn2", "assistant: call(c1 ping)", "tool[c1]:pong",
			"assistant:reply2", "user:turn3", "assistant:reply3", "user:now"}},
		{3, []string{"system:SUMMARY", "user:turn2", "assistant: call(c1 ping)", "tool[c1]:pong",
			"assistant:reply2", "user:turn3", "assistant:reply3", "user:now"}},
		{2, []string{"system:SUMMARY", "user:turn3", "assistant:reply3", "user:now"}},
		{1, []string{"system:SUMMARY", "user:now"}},
	}
	// capTurns on the log plus the incoming turn, then one real run.
	base := e.messages(sess.ID)
	base = append(base, sessions.Message{Role: sessions.RoleUser, Content: "now"})
	for _, tc := range tests {
		if got := llmRoles(toLLM(capTurns(base, tc.turns))); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("cap %d:\n got %q\nwant %q", tc.turns, got, tc.want)
		}
	}
	// A real log has its summary first (compaction archives what it
	// replaced); the run reads only the summary and the last turns.
	sess = e.session(sessions.ChatKey("telegram", "2", "2", "a"))
	for _, m := range seed[2:] {
		if _, err := e.store.Append(ctx, sess.ID, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{HistoryTurns: 3}, Inputs: []Input{{Text: "now"}}}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"system:SUMMARY", "user:turn2", "assistant: call(c1 ping)", "tool[c1]:pong",
		"assistant:reply2", "user:turn3", "assistant:reply3", "user:now"}
	if got := llmRoles(model.Requests()[0].Messages); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("request:\n got %q\nwant %q", got, want)
	}
}

func TestHistoryDefaultsByKind(t *testing.T) {
	tests := []struct {
		key  sessions.Key
		want int
	}{
		{sessions.ChatKey("telegram", "1", "u", "a"), 30},
		{sessions.CronKey("j", testNow, "a"), 10},
		{sessions.WebhookKey("h", testNow, "a"), 10},
		{sessions.CLIKey("u", "a"), 50},
		{sessions.Key{Surface: sessions.SurfaceAPI, SurfaceID: "x", AgentID: "a"}, 50},
		{sessions.MCPKey("default", "a"), 50},
	}
	for _, tc := range tests {
		if got := sessions.DefaultHistoryTurns(tc.key.Kind()); got != tc.want {
			t.Errorf("%s: %d turns, want %d", tc.key, got, tc.want)
		}
	}
}

func TestHistoryRepairsUnansweredCalls(t *testing.T) {
	msgs := []sessions.Message{
		{Role: sessions.RoleTool, ToolCallID: "stray", Content: "lost"},
		{Role: sessions.RoleUser, Content: "q"},
		{Role: sessions.RoleAssistant, ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "a"}, {ID: "c2", Name: "b"}}},
		{Role: sessions.RoleTool, ToolCallID: "c2", Content: "two"},
		{Role: sessions.RoleUser, Content: "next"},
	}
	want := []string{"user:q", "assistant: call(c1 a) call(c2 b)", "tool[c2]:two", "tool[c1]:error: no result was recorded", "user:next"}
	if got := llmRoles(toLLM(msgs)); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestModelResolution(t *testing.T) {
	meta := json.RawMessage(`{"model":"anthropic/claude-session"}`)
	tests := []struct {
		name   string
		inputs []Input
		meta   json.RawMessage
		agent  string
		def    string
		want   string
	}{
		{"latest message wins", []Input{{Model: "openai/first"}, {Model: "openai/second"}, {}}, meta, "openai/agent", "echo", "openai/second"},
		{"session override", []Input{{}}, meta, "openai/agent", "echo", "anthropic/claude-session"},
		{"agent", nil, json.RawMessage(`{"title":"x"}`), "openai/agent", "echo", "openai/agent"},
		{"bad metadata ignored", nil, json.RawMessage(`not json`), "openai/agent", "echo", "openai/agent"},
		{"server default", nil, nil, "", "echo", "echo"},
		{"nothing", nil, nil, "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveModel(tc.inputs, sessions.Session{Metadata: tc.meta}, tc.agent, tc.def); got != tc.want {
				t.Errorf("resolveModel = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRunUsesResolvedModel(t *testing.T) {
	model := echo.New()
	e := newEnv(t, model)
	sess := e.cliSession()
	res, err := e.run(Request{Session: sess, Agent: AgentConfig{Model: "openai/agent-model"}, Inputs: []Input{{Text: "hi", Model: "openai/gpt-4o-mini"}}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(e.specs) != 1 || e.specs[0] != "openai/gpt-4o-mini" {
		t.Errorf("opened %q, want openai/gpt-4o-mini", e.specs)
	}
	if got := model.Requests()[0].Model; got != "gpt-4o-mini" {
		t.Errorf("request model = %q, want the provider's name", got)
	}
	if m := res.Messages[len(res.Messages)-1]; m.Model != "openai/gpt-4o-mini" {
		t.Errorf("assistant model = %q, want the spec", m.Model)
	}
	if _, err := New(Options{Store: e.store}).Run(t.Context(), Request{Session: sess, Inputs: []Input{{Text: "x"}}}); err == nil {
		t.Error("Run with no model configured succeeded")
	}
}

func TestSessionModel(t *testing.T) {
	for _, tc := range []struct{ meta, want string }{
		{``, ""},
		{`{}`, ""},
		{`{"title":"x"}`, ""},
		{`{"model":"openai/gpt-4o"}`, "openai/gpt-4o"},
		{`{"other":1,"model":" anthropic/claude "}`, "anthropic/claude"},
		{`{"\u006dodel":"escaped/key"}`, "escaped/key"},
		{`{"model":`, ""}, // not JSON: no override
	} {
		if got := sessionModel(json.RawMessage(tc.meta)); got != tc.want {
			t.Errorf("sessionModel(%s) = %q, want %q", tc.meta, got, tc.want)
		}
	}
}

// Each assistant message records the SHA-256 of the system prompt its turn
// sent, so two runs can be compared: the same prompt gives the same
// digest, a changed one another.
func TestAssistantMessagesRecordThePromptDigest(t *testing.T) {
	model := echo.New()
	e := newEnv(t, model)
	s := e.session(sessions.CLIKey("u1", "a1"))
	digests := func() []string {
		t.Helper()
		msgs, err := e.store.Messages(context.Background(), s.ID, sessions.MessagesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			if m.Role != sessions.RoleAssistant {
				continue
			}
			var meta struct {
				Digest string `json:"system_prompt_digest"`
			}
			if err := json.Unmarshal(m.Metadata, &meta); err != nil {
				t.Fatalf("assistant message %s metadata %q: %v", m.ID, m.Metadata, err)
			}
			out = append(out, meta.Digest)
		}
		return out
	}
	for i, prompt := range []string{"PROMPT-ONE", "PROMPT-ONE", "PROMPT-TWO"} {
		if _, err := e.run(Request{Session: s, Agent: AgentConfig{ID: "a1", Prompt: prompt}, Inputs: []Input{{Text: fmt.Sprint("hi ", i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	got, reqs := digests(), model.Requests()
	if len(got) != 3 || len(reqs) != 3 {
		t.Fatalf("%d digests for %d model calls, want 3 each", len(got), len(reqs))
	}
	for i, r := range reqs {
		sum := sha256.Sum256([]byte(r.System))
		if want := "sha256:" + hex.EncodeToString(sum[:]); got[i] != want {
			t.Fatalf("reply %d: digest %q, want %q of the prompt sent", i, got[i], want)
		}
	}
	if got[0] != got[1] || got[1] == got[2] {
		t.Fatalf("digests %q: the same prompt must give the same one, a changed prompt another", got)
	}
}

// history.omit_tool_results: an earlier turn's result of a named tool is
// replaced by a line saying so in the next turn's prompt; another tool's is
// kept, and the turn in progress sees its own result of the named tool.
func TestOmittedToolResultsLeaveThePrompt(t *testing.T) {
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", "web_fetch", `{}`), call("c2", "ping", `{}`)}}).
		Then(llm.Response{Text: "read it"}).
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c3", "web_fetch", `{}`)}}).
		Then(llm.Response{Text: "read again"})
	e := newEnv(t, model)
	e.register(textTool("web_fetch", "BIG-PAGE"), textTool("ping", "PONG"))
	sess := e.cliSession()
	cfg := AgentConfig{Tools: []string{"web_fetch", "ping"}, OmitToolResults: []string{"web_*"}}
	for _, text := range []string{"fetch it", "fetch it again"} {
		if _, err := e.run(Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: text}}}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4", len(reqs))
	}
	results := func(r llm.Request) map[string]string {
		out := map[string]string{}
		for _, m := range r.Messages {
			if m.Role == llm.RoleTool {
				out[m.ToolCallID] = m.Content
			}
		}
		return out
	}
	// The first turn's own results reach the model whole.
	if got := results(reqs[1]); got["c1"] != "BIG-PAGE" || got["c2"] != "PONG" {
		t.Fatalf("first turn's second call saw %v", got)
	}
	// The next turn: c1 left out, c2 kept; then its own c3 whole.
	got := results(reqs[3])
	if strings.Contains(got["c1"], "BIG-PAGE") || !strings.Contains(got["c1"], "left out") || got["c2"] != "PONG" || got["c3"] != "BIG-PAGE" {
		t.Fatalf("second turn saw %v", got)
	}
	// What is stored is whole: only the prompt leaves it out.
	if stored := e.messages(sess.ID); !strings.Contains(fmt.Sprint(stored), "BIG-PAGE") {
		t.Fatal("the stored tool result lost its content")
	}
}
