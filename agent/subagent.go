package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// MaxSubagentDepth is how deep subagents may nest: a child's child's child.
const MaxSubagentDepth = 3

// ErrAbortedByParent is the cause a child run ends with when its parent's
// run was aborted; the child's tool calls then read "aborted by parent".
var ErrAbortedByParent = errors.New("aborted by parent")

// abortedText is what an aborted tool call records.
func abortedText(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), ErrAbortedByParent) {
		return "aborted by parent"
	}
	return "aborted"
}

// SpawnOptions are what sessions_spawn needs from the daemon.
type SpawnOptions struct {
	// Resolve opens the child session for a key.
	Resolve func(ctx context.Context, key sessions.Key) (sessions.Session, error)
	// Config is the configuration of agentID for a child whose root
	// session is root (so the child inherits the root's history limit);
	// false when there is no such agent.
	Config func(agentID string, root sessions.Key) (AgentConfig, bool)
	// Subagents lists the other agents agentID may hand tasks to; nil
	// (or a nil func) allows none: an agent hands tasks only to itself.
	Subagents func(agentID string) []string
}

// mayRun reports whether an agent may hand a task to another, and else
// says what it may use.
func (o SpawnOptions) mayRun(parent, child string) (bool, string) {
	var allowed []string
	if o.Subagents != nil {
		allowed = o.Subagents(parent)
	}
	if child == parent || slices.Contains(allowed, child) {
		return true, ""
	}
	if len(allowed) == 0 {
		return false, "leave agent out to hand the task to a subagent like yourself"
	}
	return false, "leave agent out to hand the task to a subagent like yourself, or use one of: " + strings.Join(allowed, ", ")
}

// SubagentDepth is how many subagents deep a session key is (0 for a
// session a person or a job started).
func SubagentDepth(k sessions.Key) int {
	if k.Surface != sessions.SurfaceSubagent {
		return 0
	}
	return strings.Count(k.SurfaceID, ":subagent:")
}

// rootKey is the session a chain of subagents started from, as far as a
// child's key tells: its surface (so its kind and history limit), user and
// workspace. A subagent's id begins with its root's "<surface>:<id>".
func rootKey(k sessions.Key) sessions.Key {
	if k.Surface != sessions.SurfaceSubagent {
		return k
	}
	root, _, _ := strings.Cut(k.SurfaceID, ":subagent:")
	surface, id, _ := strings.Cut(root, ":")
	return sessions.Key{Surface: surface, SurfaceID: id, UserID: k.UserID, WorkspaceID: k.WorkspaceID, AgentID: k.AgentID}
}

// SpawnTool is sessions_spawn: it runs a task in a child session with its
// own context and returns the child's final answer as the tool result.
// Aborting the parent aborts the child.
func (r *Runner) SpawnTool(opts SpawnOptions) tools.Tool {
	return tools.Tool{
		Name: "sessions_spawn",
		Description: "Hand a self-contained task to a subagent, which works on it in a fresh session of its own " +
			"and returns its final answer. Use it for side tasks whose working would clutter this conversation.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"task":{"type":"string","minLength":1,"description":"everything the subagent needs to know to do the task"},` +
			`"agent":{"type":"string","description":"the agent to run it; default: this one"}},` +
			`"required":["task"],"additionalProperties":false}`),
		Run: func(ctx context.Context, call tools.Call) (string, error) {
			var args struct {
				Task  string `json:"task"`
				Agent string `json:"agent"`
			}
			if err := tools.Decode(call.Arguments, &args); err != nil {
				return "", fmt.Errorf(`%w; pass {"task": "...", "agent": "..."}`, err)
			}
			if strings.TrimSpace(args.Task) == "" {
				return "", errors.New("task is empty; describe the task for the subagent")
			}
			parent := call.Key
			if SubagentDepth(parent) >= MaxSubagentDepth {
				return "", fmt.Errorf("subagents nest at most %d deep and this is one at depth %d; do this task yourself", MaxSubagentDepth, SubagentDepth(parent))
			}
			agentID := args.Agent
			if agentID == "" {
				agentID = parent.AgentID
			}
			// The same words for an agent that exists and one that
			// doesn't: a chat learns no agent's name it may not use.
			if ok, use := opts.mayRun(parent.AgentID, agentID); !ok {
				return "", fmt.Errorf("there is no agent %q this agent may hand tasks to; %s", agentID, use)
			}
			cfg, ok := opts.Config(agentID, rootKey(parent))
			if !ok {
				return "", fmt.Errorf("there is no agent %q", agentID)
			}
			suffix := make([]byte, 3)
			_, _ = rand.Read(suffix)
			key := sessions.SubagentKey(parent, r.now(), hex.EncodeToString(suffix), agentID)
			child, err := opts.Resolve(ctx, key)
			if err != nil {
				return "", fmt.Errorf("open the subagent's session: %w", err)
			}
			// The child runs on a context of its own, ended with a cause
			// when the parent's ends, so its tool calls say why.
			childCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
			defer cancel(nil)
			stop := context.AfterFunc(ctx, func() { cancel(ErrAbortedByParent) })
			defer stop()
			// The child's tool calls ask the parent's person, the same way,
			// and are judged by the callers' rules too (never more rights
			// than the chat they came from).
			origin := call.Origin
			origin.Callers = append(slices.Clone(origin.Callers), permissions.Caller{AgentID: parent.AgentID, SessionID: string(call.SessionID)})
			res, err := r.Run(childCtx, Request{Session: child, Agent: cfg, Inputs: []Input{{Text: args.Task}}, inherited: &origin})
			switch {
			case errors.Is(context.Cause(childCtx), ErrAbortedByParent):
				return "", ErrAbortedByParent
			case err != nil:
				return "", fmt.Errorf("the subagent failed: %w", err)
			case strings.TrimSpace(res.Reply) == "":
				return "(the subagent finished without an answer)", nil
			}
			return res.Reply, nil
		},
	}
}
