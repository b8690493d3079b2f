package turns

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/harness"
	"github.com/parleyd/parley/sessions"
)

// withHarness gives a turn's agent config what its session runs on beyond
// its agent: the harness's prompt before the agent's, its tools and those
// of every capability (the harness's and the session's), its model unless
// the session has its own, and its step cap. A session routed by a
// binding or agent with a harness, and none pinned yet, pins the harness's
// version now, and keeps it. It returns the session as the turn should see
// it.
func (b *Bridge) withHarness(ctx context.Context, in gateway.TurnInput, cfg *agent.AgentConfig) sessions.Session {
	sess := in.Session
	if b.o.Harnesses == nil {
		return sess
	}
	if ref, _ := harness.Of(sess.Metadata); ref.ID == "" {
		if id := b.routedHarness(in); id != "" {
			if pinned, err := b.pinHarness(ctx, sess, id); err != nil {
				b.log.WarnContext(ctx, "pin the session's harness; this turn runs without it", "session_id", sess.ID, "harness", id, "error", err)
			} else {
				sess = pinned
			}
		}
	}
	r, err := b.o.Harnesses.Resolve(ctx, sess)
	if err != nil {
		b.log.WarnContext(ctx, "read the session's harness; this turn runs on its agent alone", "session_id", sess.ID, "error", err)
		return sess
	}
	if h := r.Harness; h != nil {
		if h.Prompt != "" {
			cfg.Prompt = strings.TrimSpace(h.Prompt + "\n\n" + cfg.Prompt)
		}
		if h.Model != "" && !sessionHasModel(sess.Metadata) {
			cfg.Model = h.Model
		}
		if h.MaxSteps > 0 && (cfg.MaxSteps == 0 || h.MaxSteps < cfg.MaxSteps) {
			cfg.MaxSteps = h.MaxSteps
		}
		cfg.Tools = union(cfg.Tools, h.Tools)
	}
	for _, c := range r.Capabilities {
		cfg.Tools = union(cfg.Tools, harness.CapabilityTools(c))
	}
	return sess
}

// routedHarness is the harness a turn's session gets from the binding
// that routed its message, else from its agent; "" for none.
func (b *Bridge) routedHarness(in gateway.TurnInput) string {
	cfg := b.cfg()
	if len(in.Messages) > 0 {
		m := in.Messages[0]
		if h := cfg.BindingHarness(string(m.Adapter), m.ChatID, m.UserID); h != "" {
			return h
		}
	}
	a, _ := cfg.Agent(in.Session.Key.AgentID)
	return a.Harness
}

func (b *Bridge) pinHarness(ctx context.Context, sess sessions.Session, id string) (sessions.Session, error) {
	ref, err := b.o.Harnesses.Pin(ctx, id)
	if err != nil {
		return sess, err
	}
	raw, _ := json.Marshal(ref)
	patch, _ := json.Marshal(map[string]json.RawMessage{"harness": raw})
	return b.sessions.Update(ctx, sess.ID, sessions.Update{Metadata: patch})
}

func sessionHasModel(meta json.RawMessage) bool {
	var m struct {
		Model string `json:"model"`
	}
	return json.Unmarshal(meta, &m) == nil && m.Model != ""
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
