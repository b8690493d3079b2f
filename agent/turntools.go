package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/parleyd/parley/clienttools"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/skills"
	"github.com/parleyd/parley/tools"
)

// Events of client tool calls, with SessionID set.
const (
	// EventToolRequested asks the session's client for the result of a
	// call of a tool it declared.
	EventToolRequested events.Type = "tool.requested" // Data: ToolRequested
	// EventStatusChanged says the run's status changed within the run
	// (waiting for client tool results, and back to busy).
	EventStatusChanged events.Type = "status.changed" // Data: Status
)

// ToolRequested is the data of a tool.requested event.
type ToolRequested struct {
	clienttools.Call
}

// turnTools are the tools a turn adds to its agent's, on a registry of the
// turn's own: the skill tool when the agent has skills, and the tools the
// session's client declared. A name the agent's own tools already have
// stays the agent's.
func (t *turn) turnTools(ctx context.Context, selected []tools.Tool) ([]tools.Tool, error) {
	if t.side != nil {
		return nil, nil
	}
	taken := map[string]bool{}
	for _, tool := range selected {
		taken[tool.Name] = true
	}
	var extra []tools.Tool
	if list := t.loadSkills(ctx); len(list) > 0 && !taken[skills.ToolName] {
		t.skills = list
		extra = append(extra, skills.Tool(list))
		taken[skills.ToolName] = true
	}
	client, err := t.clientTools(ctx, taken)
	if err != nil {
		return nil, err
	}
	extra = append(extra, client...)
	if len(extra) == 0 {
		return nil, nil
	}
	reg, err := sideRegistry(extra)
	if err != nil {
		return nil, err
	}
	// The permission rules check these calls as they check the agent's.
	reg.SetPermissions(t.reg.Permissions())
	t.local = reg
	return extra, nil
}

// loadSkills finds the agent's skills, fresh each turn. A broken skill is
// left out and logged once per process.
func (t *turn) loadSkills(ctx context.Context) []skills.Skill {
	if len(t.req.Agent.SkillDirs) == 0 {
		return nil
	}
	list, problems := skills.Load(t.req.Agent.SkillDirs)
	for _, p := range problems {
		if _, seen := t.r.warned.LoadOrStore(p.Error(), true); !seen {
			t.r.log.WarnContext(ctx, "skill left out", "agent_id", t.req.Agent.ID, "error", p)
		}
	}
	return list
}

// clientTools are the tools the session's client declared, each calling the
// client; a name that is taken is left out.
func (t *turn) clientTools(ctx context.Context, taken map[string]bool) ([]tools.Tool, error) {
	hub := t.r.opts.ClientTools
	if hub == nil || t.req.Session.Key.Surface != sessions.SurfaceAPI {
		return nil, nil
	}
	specs, err := hub.Declared(t.pctx, t.id)
	if err != nil {
		return nil, err
	}
	var out []tools.Tool
	for _, spec := range specs {
		if taken[spec.Name] {
			t.r.log.WarnContext(ctx, "client tool left out: the agent has a tool of that name", "session_id", t.id, "tool", spec.Name)
			continue
		}
		taken[spec.Name] = true
		tool := tools.Tool{Name: spec.Name, Description: spec.Description, Run: t.callClient}
		if spec.Checked() {
			tool.Schema = spec.InputSchema
		} else {
			// The model still gets the schema; the client checks the
			// arguments itself.
			if t.modelSchemas == nil {
				t.modelSchemas = map[string]json.RawMessage{}
			}
			t.modelSchemas[spec.Name] = spec.InputSchema
		}
		out = append(out, tool)
	}
	return out, nil
}

// llmTool is how the model is told of tool.
func (t *turn) llmTool(tool tools.Tool) llm.Tool {
	schema := tool.Schema
	if s, ok := t.modelSchemas[tool.Name]; ok {
		schema = s
	}
	return llm.Tool{Name: tool.Name, Description: tool.Description, Schema: schema}
}

// registryFor is the registry that runs the named tool.
func (t *turn) registryFor(name string) *tools.Registry {
	if t.local != nil {
		if _, ok := t.local.Tool(name); ok {
			return t.local
		}
	}
	return t.reg
}

// callClient runs a call of a client tool: the client is asked for the
// result (tool.requested) and the run waits, as waiting_for_tool_results,
// until it comes, the timeout passes or the run ends.
func (t *turn) callClient(ctx context.Context, call tools.Call) (string, error) {
	hub := t.r.opts.ClientTools
	p, err := hub.Expect(clienttools.Call{SessionID: t.id, ID: call.ID, Name: call.Name, Arguments: call.Arguments})
	if err != nil {
		return "", err
	}
	// The board says waiting before the client hears of the call.
	st := t.waiting(call.ID, true)
	t.publish(EventToolRequested, ToolRequested{p.Call()})
	t.publish(EventStatusChanged, st)
	res, err := p.Wait(ctx)
	t.publish(EventStatusChanged, t.waiting(call.ID, false))
	switch {
	case err != nil:
		return "", err
	case res.IsError:
		return "", errors.New(cmp.Or(res.Output, "the client reported an error without saying what it was"))
	}
	return res.Output, nil
}

// waiting records that the run waits for call id's result (on true) or no
// longer does, on the status board, and returns the status.
func (t *turn) waiting(id string, on bool) Status {
	t.waitMu.Lock()
	defer t.waitMu.Unlock()
	if on {
		t.waitingFor = append(t.waitingFor, id)
	} else if i := slices.Index(t.waitingFor, id); i >= 0 {
		t.waitingFor = slices.Delete(t.waitingFor, i, i+1)
	}
	pending := slices.Clone(t.waitingFor)
	var st Status
	t.r.statuses.update(t.id, func(s *Status) {
		s.State, s.PendingToolCalls = StateWaitingForToolResults, pending
		if len(pending) == 0 {
			s.State, s.PendingToolCalls = StateBusy, nil
		}
		st = *s
	})
	return st
}

// clientTimeout is the error that ends the turn when a client tool call
// went unanswered until its timeout, or nil.
func clientTimeout(results []tools.Result) error {
	for _, r := range results {
		if errors.Is(r.Err, clienttools.ErrTimeout) {
			return fmt.Errorf("%w, so the turn ended; post results to /v1/sessions/{id}/tool_results sooner, "+
				"or raise sessions.client_tools.timeout", r.Err)
		}
	}
	return nil
}
