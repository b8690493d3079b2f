package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// InstructionsFile is the workspace instruction file read into the prompt.
const InstructionsFile = "AGENTS.md"

// Prompt is everything the system prompt is assembled from.
type Prompt struct {
	// Agent is the agent's own prompt.
	Agent string
	// Workspace is the content of the workspace's AGENTS.md.
	Workspace string
	// Skills is the skill index.
	Skills string
	// Now is the current time; Location (nil means UTC) is the agent's zone.
	Now      time.Time
	Location *time.Location
	Surface  string
	// DisplayName is the user's name, given for channel sessions only.
	DisplayName string
	Tools       []tools.Tool
	// Minimal keeps only the agent prompt, environment and tool catalog.
	Minimal bool
}

// BuildSystemPrompt assembles the system prompt in a fixed order, skipping
// empty sections: agent prompt, workspace instructions, skill index,
// environment, tool catalog.
func BuildSystemPrompt(p Prompt) string {
	var sections []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			sections = append(sections, s)
		}
	}
	add(p.Agent)
	if !p.Minimal {
		if w := strings.TrimSpace(p.Workspace); w != "" {
			add("## Workspace instructions (" + InstructionsFile + ")\n\n" + w)
		}
		if s := strings.TrimSpace(p.Skills); s != "" {
			add("## Skills\n\n" + s)
		}
	}
	add(environment(p))
	if len(p.Tools) > 0 {
		var b strings.Builder
		b.WriteString("## Tools\n")
		for _, t := range p.Tools {
			fmt.Fprintf(&b, "\n- %s: %s", t.Name, strings.TrimSpace(t.Description))
		}
		add(b.String())
	}
	return strings.Join(sections, "\n\n")
}

func environment(p Prompt) string {
	if p.Now.IsZero() && p.Surface == "" && p.DisplayName == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Environment\n")
	if !p.Now.IsZero() {
		loc := p.Location
		if loc == nil {
			loc = time.UTC
		}
		now := p.Now.In(loc)
		fmt.Fprintf(&b, "\nCurrent date and time: %s", now.Format("Monday, 2 January 2006 15:04 MST"))
		fmt.Fprintf(&b, "\nTime zone: %s (UTC%s)", loc.String(), now.Format("-07:00"))
	}
	if p.Surface != "" {
		fmt.Fprintf(&b, "\nSurface: %s", p.Surface)
	}
	if p.DisplayName != "" {
		fmt.Fprintf(&b, "\nUser: %s", p.DisplayName)
	}
	return b.String()
}

// capTurns keeps the last n user turns of msgs. A turn starts at a user
// message, so the cut never separates a tool call from its results.
// Compaction summaries before the cut are kept in front.
func capTurns(msgs []sessions.Message, n int) []sessions.Message {
	if n <= 0 {
		return msgs
	}
	seen, cut := 0, -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == sessions.RoleUser {
			seen++
			if seen == n {
				cut = i
				break
			}
		}
	}
	if cut <= 0 {
		return msgs
	}
	var out []sessions.Message
	for _, m := range msgs[:cut] {
		if m.Summary {
			out = append(out, m)
		}
	}
	if out == nil {
		return msgs[cut:]
	}
	return append(out, msgs[cut:]...)
}

// noResultText answers a tool call whose result was never stored.
var noResultText = tools.Failed(errNoResult).Content

// toLLM maps stored messages to model messages. System messages go in only
// when they are compaction summaries. Every tool call is answered exactly
// once: a result with no call before it is dropped, and a call whose result
// was never recorded gets one, so providers accept the history.
func toLLM(msgs []sessions.Message) []llm.Message { return toLLMWith(msgs, nil) }

// toLLMWith is toLLM with the text of user messages that carry files taken
// from rendered, which remembers it (nil renders each afresh).
func toLLMWith(msgs []sessions.Message, rendered *renderCache) []llm.Message {
	// Room for what a turn adds (its input, the reply, a tool round)
	// without copying the history again.
	out := make([]llm.Message, 0, len(msgs)+8)
	var pending []string // calls of the last assistant message still unanswered
	flush := func() {
		for _, id := range pending {
			out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: noResultText})
		}
		pending = nil
	}
	for _, m := range msgs {
		if m.Role != sessions.RoleTool {
			flush()
		}
		switch m.Role {
		case sessions.RoleUser:
			out = append(out, llm.Message{Role: llm.RoleUser, Content: rendered.userContent(m)})
		case sessions.RoleAssistant:
			am := llm.Message{Role: llm.RoleAssistant, Content: m.Content}
			for _, tc := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
				pending = append(pending, tc.ID)
			}
			out = append(out, am)
		case sessions.RoleTool:
			i := indexOf(pending, m.ToolCallID)
			if i < 0 {
				continue
			}
			pending = append(pending[:i], pending[i+1:]...)
			out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: m.ToolCallID, Content: m.Content})
		case sessions.RoleSystem:
			if m.Summary {
				out = append(out, llm.Message{Role: llm.RoleSystem, Content: m.Content})
			}
		}
	}
	flush()
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// resolveModel picks the model spec: the latest per-message override, then
// the session's "model" metadata, then the agent's, then the default.
func resolveModel(inputs []Input, sess sessions.Session, agentModel, def string) string {
	for i := len(inputs) - 1; i >= 0; i-- {
		if inputs[i].Model != "" {
			return inputs[i].Model
		}
	}
	if m := sessionModel(sess.Metadata); m != "" {
		return m
	}
	if agentModel != "" {
		return agentModel
	}
	return def
}

func sessionModel(meta json.RawMessage) string {
	// Most sessions have no override: spare them the decoding. Without
	// the bytes "model" (or an escape that could spell them), there is no
	// such key.
	if len(meta) == 0 || !bytes.Contains(meta, []byte("model")) && !bytes.Contains(meta, []byte(`\`)) {
		return ""
	}
	var v struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(meta, &v) != nil {
		return ""
	}
	return strings.TrimSpace(v.Model)
}

// PromptDigest is a system prompt's SHA-256, as "sha256:" and its hex: each
// assistant message records its turn's (metadata.system_prompt_digest), so
// two runs can be compared for the prompt they sent. Empty for no prompt.
func PromptDigest(system string) string {
	if system == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(system))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// omitToolResults replaces, in a prompt's messages, the results of the
// tools omit names that came before its last user message (earlier turns':
// the turn in progress keeps its own) by a line saying they were left out.
// The result itself stays: every call keeps its answer, as providers want.
func omitToolResults(msgs []llm.Message, omit []string) {
	if len(omit) == 0 {
		return
	}
	last := -1
	for i, m := range msgs {
		if m.Role == llm.RoleUser {
			last = i
		}
	}
	names := map[string]string{} // call id -> tool
	for i := range last {
		m := &msgs[i]
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
		if m.Role != llm.RoleTool {
			continue
		}
		if name, ok := names[m.ToolCallID]; ok && permissions.MatchAnyTool(omit, name) {
			m.Content = "[" + name + "'s result is left out of the context by this agent's history.omit_tool_results]"
		}
	}
}
