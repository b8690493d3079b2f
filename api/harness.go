package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/harness"
	"github.com/parleyd/parley/sessions"
)

// Activity values: what a session is doing, as the design documents name
// it, beside its status (active or archived).
const (
	ActivityStarted               = "started" // no message yet
	ActivityActive                = "active"  // a run is going on
	ActivityIdle                  = "idle"
	ActivityWaitingForToolResults = "waiting_for_tool_results"
	ActivityWaitingForPermission  = "waiting_for_permission"
)

// SessionView is a session as the API shows it: its record, what it is
// doing, and the features its harness, agent and capabilities give.
type SessionView struct {
	sessions.Session
	Activity string   `json:"activity"`
	Features []string `json:"features"`
}

// view is sess as the API shows it.
func (s *server) view(ctx context.Context, sess sessions.Session) SessionView {
	v := SessionView{Session: sess, Activity: ActivityIdle, Features: []string{}}
	if s.opts.Harnesses != nil {
		v.Features = s.opts.Harnesses.Features(ctx, sess)
	}
	var st agent.State
	if s.opts.Runner != nil {
		st = s.opts.Runner.Status(sess.ID).State
	}
	switch {
	case st == StateWaitingForToolResults:
		v.Activity = ActivityWaitingForToolResults
	case st == StateWaitingForPermission:
		v.Activity = ActivityWaitingForPermission
	case st != "" && st != StateIdle && st != StateError:
		v.Activity = ActivityActive
	case sess.MessageCount == 0:
		v.Activity = ActivityStarted
	}
	return v
}

// viewPage is a page of sessions as the API shows them.
type viewPage struct {
	Sessions []SessionView `json:"sessions"`
	Next     string        `json:"next_cursor,omitempty"`
}

func (s *server) viewPage(ctx context.Context, page sessions.Page) viewPage {
	out := viewPage{Sessions: make([]SessionView, 0, len(page.Sessions)), Next: page.Next}
	for _, sess := range page.Sessions {
		out.Sessions = append(out.Sessions, s.view(ctx, sess))
	}
	return out
}

// withHarness pins the harness id names (its current version) and sets
// the session capabilities caps in a new session's metadata; each unknown
// one is a 400 naming it.
func (s *server) withHarness(ctx context.Context, meta json.RawMessage, id string, caps []string) (json.RawMessage, error) {
	id = strings.TrimSpace(id)
	if id == "" && len(caps) == 0 {
		return meta, nil
	}
	if s.opts.Harnesses == nil {
		return nil, badRequest("harnesses and capabilities are not available on this server")
	}
	obj := map[string]json.RawMessage{}
	if len(meta) > 0 && string(meta) != "null" {
		if err := json.Unmarshal(meta, &obj); err != nil || obj == nil {
			return nil, badRequest("metadata must be a JSON object")
		}
	}
	if id != "" {
		ref, err := s.opts.Harnesses.Pin(ctx, id)
		if errors.Is(err, harness.ErrUnknown) {
			return nil, badRequest(err.Error())
		}
		if err != nil {
			return nil, err
		}
		obj["harness"], _ = json.Marshal(ref)
	}
	if len(caps) > 0 {
		if err := s.opts.Harnesses.CheckCapabilities(caps); err != nil {
			return nil, badRequest(err.Error())
		}
		obj["capabilities"], _ = json.Marshal(dedupe(caps))
	}
	return json.Marshal(obj)
}

// addCapabilities adds caps to a session's capabilities, recording the
// change in its history.
func (s *server) addCapabilities(ctx context.Context, id sessions.ID, caps []string) error {
	if s.opts.Harnesses == nil {
		return badRequest("capabilities are not available on this server")
	}
	if err := s.opts.Harnesses.CheckCapabilities(caps); err != nil {
		return badRequest(err.Error())
	}
	cur, err := s.opts.Store.Session(ctx, id)
	if err != nil {
		return err
	}
	_, have := harness.Of(cur.Metadata)
	var added []string
	for _, c := range dedupe(caps) {
		if !slices.Contains(have, c) {
			added = append(added, c)
		}
	}
	if len(added) == 0 {
		return nil
	}
	all, _ := json.Marshal(append(have, added...))
	patch, _ := json.Marshal(map[string]json.RawMessage{"capabilities": all})
	if _, err := s.opts.Store.Update(ctx, id, sessions.Update{Metadata: patch}); err != nil {
		return err
	}
	return s.note(ctx, id, fmt.Sprintf("Capabilities added: %s.", strings.Join(added, ", ")))
}

// note records a change of a session's setup in its history: a synthetic
// system message, which clients show and the model is not sent.
func (s *server) note(ctx context.Context, id sessions.ID, text string) error {
	_, err := s.opts.Store.Append(ctx, id, sessions.Message{Role: sessions.RoleSystem, Content: text, Synthetic: true})
	return err
}

func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		if x = strings.TrimSpace(x); x != "" && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
