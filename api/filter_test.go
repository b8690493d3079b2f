package api_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// GET /v1/sessions/{id}/messages?since=&until=&role=&tool=&type= returns
// exactly the messages every filter given keeps, paged as the rest are;
// bad filters are a 400 naming what to change.
func TestMessageFilters(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open)
		ctx := context.Background()
		s := e.createSession(t, `{}`)
		var at []time.Time
		add := func(m sessions.Message) {
			t.Helper()
			stored, err := e.store.Append(ctx, s.ID, m)
			if err != nil {
				t.Fatal(err)
			}
			at = append(at, stored.CreatedAt)
			time.Sleep(3 * time.Millisecond) // each its own millisecond
		}
		args := json.RawMessage(`{}`)
		add(sessions.Message{Role: sessions.RoleUser, Content: "q1"})
		add(sessions.Message{Role: sessions.RoleAssistant, Content: "calling",
			ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "web_fetch", Arguments: args}, {ID: "c2", Name: "ping", Arguments: args}}})
		add(sessions.Message{Role: sessions.RoleTool, ToolCallID: "c1", Content: "page"})
		add(sessions.Message{Role: sessions.RoleTool, ToolCallID: "c2", Content: "pong"})
		add(sessions.Message{Role: sessions.RoleAssistant, Content: "a1"})
		add(sessions.Message{Role: sessions.RoleUser, Content: "q2", Parts: []sessions.Part{{Type: "file", Name: "r.csv", MediaType: "text/csv"}}})
		add(sessions.Message{Role: sessions.RoleAssistant, Content: "note", Synthetic: true})
		add(sessions.Message{Role: sessions.RoleAssistant, Content: "fetching again",
			ToolCalls: []sessions.ToolCall{{ID: "c3", Name: "web_search", Arguments: args}}})
		add(sessions.Message{Role: sessions.RoleTool, ToolCallID: "c3", Content: "hits"})

		ts := func(i int) string { return url.QueryEscape(at[i].UTC().Format(time.RFC3339Nano)) }
		for _, tc := range []struct{ q, want string }{
			{"", "q1 calling page pong a1 q2 note fetching-again hits"},
			{"role=user", "q1 q2"},
			{"role=user,tool", "q1 page pong q2 hits"},
			{"role=assistant&role=user", "q1 calling a1 q2 note fetching-again"},
			{"tool=web_fetch", "calling page"},
			{"tool=web_*", "calling page fetching-again hits"},
			{"tool=ping,web_search", "calling pong fetching-again hits"},
			{"tool=mcp:web", ""}, // web__*, as a permission rule reads it: none here
			{"tool=nothing", ""},
			{"type=tool_result", "page pong hits"},
			{"type=tool_call", "calling fetching-again"},
			{"type=text", "q1 calling a1 q2 fetching-again"},
			{"type=file,synthetic", "q2 note"},
			{"since=" + ts(4), "a1 q2 note fetching-again hits"},
			{"until=" + ts(4), "q1 calling page pong"},
			{"since=" + ts(2) + "&until=" + ts(6), "page pong a1 q2"},
			{"since=" + ts(2) + "&until=" + ts(6) + "&role=tool", "page pong"},
			{"role=tool&tool=web_fetch", "page"},
		} {
			var got []string
			cursor := ""
			for range 20 { // pages of 2, to check the cursor with a filter
				r := e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/messages?limit=2&"+tc.q+"&cursor="+cursor, "")
				if r.status != 200 {
					t.Fatalf("%s: %d %s", tc.q, r.status, r.body)
				}
				var p api.MessagesPage
				r.decode(t, &p)
				for _, m := range p.Messages {
					got = append(got, strings.ReplaceAll(m.Content, " ", "-"))
				}
				if cursor = p.Next; cursor == "" {
					break
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("?%s: %q, want %q", tc.q, strings.Join(got, " "), tc.want)
			}
		}

		for _, tc := range []struct{ q, says string }{
			{"since=yesterday", "since must be a time in RFC 3339"},
			{"until=2026-01-01", "until must be a time in RFC 3339"},
			{"since=" + ts(4) + "&until=" + ts(2), "until must be after since"},
			{"role=robot", `role "robot" is not a role`},
			{"type=image", `type "image" is not one of text, tool_call`},
			{"tool=mcp:", `tool "mcp:": write mcp:<server> or mcp:<server>/<tool>`},
			{"tool=web%20fetch", `tool "web fetch": tool names have no spaces`},
		} {
			r := e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/messages?"+tc.q, "")
			if r.status != 400 || r.errorCode(t) != api.CodeBadRequest || !strings.Contains(errorMessage(t, r), tc.says) {
				t.Errorf("?%s: %d %s, want a 400 saying %q", tc.q, r.status, r.body, tc.says)
			}
		}
		// The event stream takes the same filters, but for role, and its
		// own types.
		for _, tc := range []struct{ q, says string }{
			{"role=user", "role filters a session's messages, not its events"},
			{"type=text", `type "text" is not one of turn.started`},
		} {
			r := e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/events?"+tc.q, "")
			if r.status != 400 || !strings.Contains(errorMessage(t, r), tc.says) {
				t.Errorf("events ?%s: %d %s, want a 400 saying %q", tc.q, r.status, r.body, tc.says)
			}
		}
	})
}

// errorMessage is the message of an error response.
func errorMessage(t *testing.T, r response) string {
	t.Helper()
	var body api.ErrorBody
	r.decode(t, &body)
	return body.Error.Message
}
