package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/skills"
)

func writeSkill(t *testing.T, dir, folder, name, description, body string) {
	t.Helper()
	p := filepath.Join(dir, folder)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: " + name + "\ndescription: " + description + "\n---\n" + body
	if err := os.WriteFile(filepath.Join(p, skills.FileName), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

func toolNames(req llm.Request) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Name)
	}
	return out
}

func TestSkillsAreIndexedAndLoadedByTheTool(t *testing.T) {
	workspace, shared := t.TempDir(), t.TempDir()
	writeSkill(t, filepath.Join(workspace, "skills"), "pdf", "pdf-forms", "Fill in PDF forms.", "STEP ONE: read the form.")
	writeSkill(t, shared, "deploy", "deploy", "Deploy the app.", "Run make deploy.")
	writeSkill(t, shared, "pdf", "pdf-forms", "The shared copy.", "NOT THIS ONE.")
	writeSkill(t, shared, "broken", "Broken Name", "x", "")

	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", skills.ToolName, `{"name": "pdf-forms"}`)}}).
		Then(llm.Response{Text: "done"})
	e := newEnv(t, model)
	e.register(textTool("ping", "pong"))
	sess := e.cliSession()
	cfg := AgentConfig{Tools: []string{"ping"}, SkillDirs: []string{filepath.Join(workspace, "skills"), shared}}
	if _, err := e.run(Request{Session: sess, Agent: cfg, Inputs: []Input{{Text: "fill my form"}}}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	reqs := model.Requests()
	assertOrder(t, reqs[0].System, "## Skills", "call the skill tool with its name", "- deploy: Deploy the app.", "- pdf-forms: Fill in PDF forms.", "## Tools", "- ping:", "- skill:")
	if strings.Contains(reqs[0].System, "The shared copy") || strings.Contains(reqs[0].System, "Broken") {
		t.Errorf("prompt lists a hidden or broken skill:\n%s", reqs[0].System)
	}
	if got := toolNames(reqs[0]); !slices.Equal(got, []string{"ping", skills.ToolName}) {
		t.Errorf("tools offered = %v, want ping and skill", got)
	}
	result := e.messages(sess.ID)[2]
	if result.ToolCallID != "c1" || !strings.Contains(result.Content, "STEP ONE: read the form.") {
		t.Fatalf("skill result = %+v", result)
	}

	// Without skills there is neither an index nor the tool; a set
	// SkillIndex is used as it is.
	model = echo.New()
	e = newEnv(t, model)
	sess = e.cliSession()
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{SkillDirs: []string{t.TempDir()}}, Inputs: []Input{{Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if r := model.Requests()[0]; strings.Contains(r.System, "## Skills") || len(r.Tools) != 0 {
		t.Errorf("no skills, yet the prompt has %q and tools %v", r.System, toolNames(r))
	}
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{SkillIndex: "GIVEN-INDEX", SkillDirs: []string{shared}}, Inputs: []Input{{Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if r := model.Requests()[1]; !strings.Contains(r.System, "## Skills\n\nGIVEN-INDEX") || strings.Contains(r.System, "deploy") {
		t.Errorf("a set SkillIndex was not used as it is:\n%s", r.System)
	}
}

// A cron job's minimal prompt leaves the index out; the skill tool is
// still offered, and lists the skills when called without a name.
func TestCronTurnOffersTheSkillToolWithoutAnIndex(t *testing.T) {
	dir := t.TempDir()
	writeSkill(t, dir, "deploy", "deploy", "Deploy the app.", "")
	model := echo.New()
	e := newEnv(t, model)
	sess := e.session(sessions.CronKey("j1", testNow, "a1"))
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{SkillDirs: []string{dir}}, Inputs: []Input{{Text: "report"}}}); err != nil {
		t.Fatal(err)
	}
	if r := model.Requests()[0]; strings.Contains(r.System, "## Skills") || !slices.Equal(toolNames(r), []string{skills.ToolName}) {
		t.Errorf("cron prompt %q, tools %v", r.System, toolNames(r))
	}
}

func TestSkillResultsAreNeverPruned(t *testing.T) {
	long := strings.Repeat("s", 60_000)
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "go"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "k1", Name: skills.ToolName, Arguments: []byte(`{"name": "x"}`)}, {ID: "f1", Name: "fetch", Arguments: []byte(`{}`)}}},
		{Role: llm.RoleTool, ToolCallID: "k1", Content: long},
		{Role: llm.RoleTool, ToolCallID: "f1", Content: long},
		{Role: llm.RoleAssistant, Content: "a2"},
		{Role: llm.RoleUser, Content: "and?"},
		{Role: llm.RoleAssistant, Content: "a3"},
		{Role: llm.RoleUser, Content: "more"},
		{Role: llm.RoleAssistant, Content: "a4"},
	}
	req := llm.Request{Messages: msgs}
	for _, lim := range []PruneLimits{DefaultPruneLimits, AggressivePruneLimits} {
		out, stats := PruneToolOutputs(req, int(EstimateRequestTokens(req)), lim)
		if out[2].Content != long {
			t.Errorf("the skill tool's result was pruned to %d characters", len(out[2].Content))
		}
		if out[3].Content == long || stats.Trimmed+stats.Cleared != 1 {
			t.Errorf("the other result was not pruned: %+v", stats)
		}
	}
	// Without the exemption both are pruned: the test can fail.
	lim := DefaultPruneLimits
	lim.KeepTools = nil
	if out, _ := PruneToolOutputs(req, int(EstimateRequestTokens(req)), lim); out[2].Content == long {
		t.Error("with no tools kept, the skill result was not pruned either")
	}
}

// The turn's own tools pass the same permission rules as the agent's: a
// skill call the rules would ask about, with nobody to ask, is denied.
func TestTurnToolsPassThePermissionRules(t *testing.T) {
	dir := t.TempDir()
	writeSkill(t, dir, "deploy", "deploy", "Deploy the app.", "Run make deploy.")
	model := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{call("c1", skills.ToolName, `{"name": "deploy"}`)}}).
		Then(llm.Response{Text: "done"})
	e := newEnv(t, model)
	e.tools.SetPermissions(permissions.NewChecker(permissions.Options{External: func(tool string) bool { return tool == skills.ToolName }}))
	sess := e.cliSession()
	if _, err := e.run(Request{Session: sess, Agent: AgentConfig{ID: "a1", SkillDirs: []string{dir}}, Inputs: []Input{{Text: "deploy"}}}); err != nil {
		t.Fatal(err)
	}
	if got := e.messages(sess.ID)[2]; !strings.HasPrefix(got.Content, "error: permission denied: skill") || strings.Contains(got.Content, "make deploy") {
		t.Fatalf("skill result under an ask rule with nobody to ask: %q", got.Content)
	}
}
