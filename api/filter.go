package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
)

// Message kinds, for ?type= on a session's messages: a message is each of
// those it shows.
var messageKinds = []string{"text", "tool_call", "tool_result", "file", "summary", "synthetic"}

// eventTypes are the types ?type= may name on the event stream.
var eventTypes = []string{TypeTurnStarted, TypeMessageDelta, TypeToolStarted, TypeToolCompleted, TypeToolRetrying, TypeUsage,
	TypeContextCompacted, TypeStatus, TypeTurnFinished, TypeTurnJoined, TypeFile}

// filter is what ?since=&until=&role=&tool=&type= keep of a session's
// messages or, but for role, of its events. A zero filter keeps all.
type filter struct {
	since, until time.Time
	roles        []sessions.Role
	tools        []permissions.ToolPattern
	types        []string
}

// parseFilter reads the filter of r's query; events says it filters the
// event stream, whose types are event types and which has no roles.
func parseFilter(r *http.Request, events bool) (filter, error) {
	q := r.URL.Query()
	var f filter
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.since}, {"until", &f.until}} {
		v := q.Get(t.name)
		if v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return filter{}, badRequest(fmt.Sprintf("%s must be a time in RFC 3339, such as 2026-11-29T08:00:00Z; got %q", t.name, v))
		}
		*t.to = at
	}
	if !f.since.IsZero() && !f.until.IsZero() && !f.until.After(f.since) {
		return filter{}, badRequest("until must be after since: the range keeps what is at or after since and before until")
	}
	if roles := list(q["role"]); len(roles) > 0 {
		if events {
			return filter{}, badRequest("role filters a session's messages, not its events; filter events by type (such as tool.completed) or tool")
		}
		for _, r := range roles {
			role := sessions.Role(r)
			if !slices.Contains([]sessions.Role{sessions.RoleUser, sessions.RoleAssistant, sessions.RoleTool, sessions.RoleSystem}, role) {
				return filter{}, badRequest(fmt.Sprintf("role %q is not a role; use user, assistant, tool or system (several separated by commas)", r))
			}
			f.roles = append(f.roles, role)
		}
	}
	for _, t := range list(q["tool"]) {
		p, err := permissions.CompileToolPattern(t)
		if err != nil {
			return filter{}, badRequest(fmt.Sprintf("tool %v; name a tool such as web_fetch, a pattern such as files__*, or mcp:<server>", err))
		}
		f.tools = append(f.tools, p)
	}
	known := messageKinds
	if events {
		known = eventTypes
	}
	for _, t := range list(q["type"]) {
		if !slices.Contains(known, t) {
			return filter{}, badRequest(fmt.Sprintf("type %q is not one of %s (several separated by commas)", t, strings.Join(known, ", ")))
		}
		f.types = append(f.types, t)
	}
	return f, nil
}

// list is a query parameter's values, each split at commas, blanks left out.
func list(vs []string) []string {
	var out []string
	for _, v := range vs {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// any reports whether f keeps less than all.
func (f filter) any() bool {
	return !f.since.IsZero() || !f.until.IsZero() || len(f.roles) > 0 || len(f.tools) > 0 || len(f.types) > 0
}

func (f filter) inRange(at time.Time) bool {
	return (f.since.IsZero() || !at.Before(f.since)) && (f.until.IsZero() || at.Before(f.until))
}

func (f filter) tool(name string) bool {
	for _, p := range f.tools {
		if p.Match(name) {
			return true
		}
	}
	return false
}

// keepMessage reports whether f keeps m; called names the tool of a
// call id (for a tool result, whose call is in an earlier message).
func (f filter) keepMessage(m sessions.Message, called func(callID string) string) bool {
	if !f.inRange(m.CreatedAt) || (len(f.roles) > 0 && !slices.Contains(f.roles, m.Role)) {
		return false
	}
	if len(f.types) > 0 && !slices.ContainsFunc(f.types, func(t string) bool { return messageIs(m, t) }) {
		return false
	}
	if len(f.tools) > 0 {
		switch {
		case m.Role == sessions.RoleTool:
			return f.tool(called(m.ToolCallID))
		default:
			return slices.ContainsFunc(m.ToolCalls, func(c sessions.ToolCall) bool { return f.tool(c.Name) })
		}
	}
	return true
}

// messageIs reports whether m is of the kind t (messageKinds).
func messageIs(m sessions.Message, t string) bool {
	switch t {
	case "text":
		return (m.Role == sessions.RoleUser || m.Role == sessions.RoleAssistant) && m.Content != "" && !m.Synthetic && !m.Summary
	case "tool_call":
		return len(m.ToolCalls) > 0
	case "tool_result":
		return m.Role == sessions.RoleTool
	case "file":
		return slices.ContainsFunc(m.Parts, func(p sessions.Part) bool { return p.Type == "file" || p.Type == "image" })
	case "summary":
		return m.Summary
	case "synthetic":
		return m.Synthetic
	}
	return false
}

// keepEvent reports whether f keeps e: by its time, its type, and for
// tool, a tool event of a named tool.
func (f filter) keepEvent(e Event) bool {
	if !f.inRange(e.TS) || (len(f.types) > 0 && !slices.Contains(f.types, e.Type)) {
		return false
	}
	if len(f.tools) > 0 {
		if e.Type != TypeToolStarted && e.Type != TypeToolCompleted && e.Type != TypeToolRetrying {
			return false
		}
		var d ToolData
		return json.Unmarshal(e.Data, &d) == nil && f.tool(d.Name)
	}
	return true
}

// keepEvents is the events of evs that f keeps.
func (f filter) keepEvents(evs []Event) []Event {
	if !f.any() {
		return evs
	}
	out := evs[:0:0]
	for _, e := range evs {
		if f.keepEvent(e) {
			out = append(out, e)
		}
	}
	return out
}

// filterScanPage is how many messages a filtered read takes from the
// store at a time while it looks for a page of matches.
const filterScanPage = 500

// filteredMessages is up to limit+1 of a session's messages after after that
// f keeps, read from the store a page at a time.
func (s *server) filteredMessages(ctx context.Context, id sessions.ID, opts sessions.MessagesOptions, f filter, limit int) ([]sessions.Message, error) {
	var (
		out   []sessions.Message
		calls = map[string]string{} // call id -> tool, of the calls read so far
		all   map[string]string     // of the whole session, read once when a result's call came before the first page
	)
	called := func(callID string) string {
		if name, ok := calls[callID]; ok {
			return name
		}
		if all == nil {
			all = map[string]string{}
			msgs, err := s.opts.Store.Messages(ctx, id, sessions.MessagesOptions{Archived: true, Hidden: true})
			if err == nil {
				for _, m := range msgs {
					for _, c := range m.ToolCalls {
						all[c.ID] = c.Name
					}
				}
			}
		}
		return all[callID]
	}
	opts.Limit = filterScanPage
	for {
		batch, err := s.opts.Store.Messages(ctx, id, opts)
		if err != nil {
			return nil, err
		}
		for _, m := range batch {
			for _, c := range m.ToolCalls {
				calls[c.ID] = c.Name
			}
			if f.keepMessage(m, called) {
				if out = append(out, m); len(out) > limit {
					return out, nil
				}
			}
		}
		if len(batch) < filterScanPage {
			return out, nil
		}
		p := sessions.PositionOf(batch[len(batch)-1])
		opts.After = &p
	}
}
