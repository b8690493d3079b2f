package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

func TestRewindBranchRoutes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open)
		ctx := context.Background()
		s := e.createSession(t, `{}`)
		base := "/v1/sessions/" + string(s.ID)
		missing := "/v1/sessions/01900000-0000-7000-8000-000000000000"
		var ids []sessions.MessageID
		for i, c := range []string{"u1", "a1", "u2", "a2"} {
			role := sessions.RoleUser
			if i%2 == 1 {
				role = sessions.RoleAssistant
			}
			m, err := e.store.Append(ctx, s.ID, sessions.Message{Role: role, Content: c})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.ID)
		}
		live := func(id sessions.ID) string {
			msgs, err := e.store.Messages(ctx, id, sessions.MessagesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, m := range msgs {
				out = append(out, m.Content)
			}
			return strings.Join(out, " ")
		}

		r := e.do(t, "POST", base+"/rewind", `{"message_id":"`+string(ids[2])+`"}`)
		if r.status != 200 {
			t.Fatalf("rewind: %d %s", r.status, r.body)
		}
		var res sessions.RewindResult
		r.decode(t, &res)
		if res.Hidden != 1 || live(s.ID) != "u1 a1 u2" {
			t.Fatalf("rewind: %+v, live %s", res, live(s.ID))
		}
		if r := e.do(t, "POST", base+"/unrewind", ""); r.status != 200 || live(s.ID) != "u1 a1 u2 a2" {
			t.Fatalf("unrewind: %d %s, live %s", r.status, r.body, live(s.ID))
		}

		r = e.do(t, "POST", base+"/branch", `{"from_message_id":"`+string(ids[1])+`","metadata":{"ephemeral":true}}`)
		if r.status != 201 {
			t.Fatalf("branch: %d %s", r.status, r.body)
		}
		var b sessions.Session
		r.decode(t, &b)
		if b.ParentID != s.ID || b.ParentMessageID != ids[1] || live(b.ID) != "u1 a1" || b.MessageCount != 2 {
			t.Fatalf("branch %+v, live %s", b, live(b.ID))
		}
		var page sessions.Page
		e.do(t, "GET", "/v1/sessions", "").decode(t, &page)
		if len(page.Sessions) != 1 {
			t.Fatalf("an ephemeral branch is listed: %d sessions", len(page.Sessions))
		}
		e.do(t, "GET", "/v1/sessions?include_ephemeral=true", "").decode(t, &page)
		if len(page.Sessions) != 2 || page.Sessions[0].ID != b.ID {
			t.Fatalf("include_ephemeral: %d sessions", len(page.Sessions))
		}

		for _, tc := range []struct {
			name, path, body string
			status           int
			code             string
		}{
			{"rewind to assistant", base + "/rewind", `{"message_id":"` + string(ids[1]) + `"}`, 400, api.CodeBadRequest},
			{"rewind unknown message", base + "/rewind", `{"message_id":"01900000-0000-7000-8000-000000000000"}`, 404, api.CodeNotFound},
			{"rewind missing session", missing + "/rewind", `{"message_id":"` + string(ids[0]) + `"}`, 404, api.CodeNotFound},
			{"rewind no id", base + "/rewind", `{}`, 400, api.CodeBadRequest},
			{"rewind bad json", base + "/rewind", `{"message_id":`, 400, api.CodeBadRequest},
			{"rewind unknown field", base + "/rewind", `{"id":"x"}`, 400, api.CodeBadRequest},
			{"rewind too large", base + "/rewind", `{"message_id":"` + strings.Repeat("x", 1<<20) + `"}`, 413, api.CodeTooLarge},
			{"unrewind nothing", base + "/unrewind", ``, 409, api.CodeConflict},
			{"unrewind missing session", missing + "/unrewind", ``, 404, api.CodeNotFound},
			{"unrewind bad body", base + "/unrewind", `{"x":1}`, 400, api.CodeBadRequest},
			{"branch unknown message", base + "/branch", `{"from_message_id":"01900000-0000-7000-8000-000000000000"}`, 404, api.CodeNotFound},
			{"branch missing session", missing + "/branch", `{"from_message_id":"` + string(ids[0]) + `"}`, 404, api.CodeNotFound},
			{"branch no id", base + "/branch", `{"metadata":{}}`, 400, api.CodeBadRequest},
			{"branch bad metadata", base + "/branch", `{"from_message_id":"` + string(ids[0]) + `","metadata":"x"}`, 400, api.CodeBadRequest},
			{"branch bad json", base + "/branch", `nope`, 400, api.CodeBadRequest},
			{"branch too large", base + "/branch", `{"from_message_id":"` + strings.Repeat("x", 1<<20) + `"}`, 413, api.CodeTooLarge},
			{"list bad include_ephemeral", "/v1/sessions?include_ephemeral=2", ``, 400, api.CodeBadRequest},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, "POST", tc.path, tc.body)
				if strings.HasPrefix(tc.path, "/v1/sessions?") {
					r = e.do(t, "GET", tc.path, "")
				}
				if r.status != tc.status || r.errorCode(t) != tc.code {
					t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
				}
			})
		}

		e.runner.setBusy(s.ID, true)
		for _, p := range []struct{ path, body string }{
			{base + "/rewind", `{"message_id":"` + string(ids[0]) + `"}`},
			{base + "/unrewind", ``},
			{base + "/branch", `{"from_message_id":"` + string(ids[0]) + `"}`},
		} {
			if r := e.do(t, "POST", p.path, p.body); r.status != 409 || r.errorCode(t) != api.CodeBusy {
				t.Errorf("%s while busy: %d %s", p.path, r.status, r.body)
			}
		}
		e.runner.setBusy(s.ID, false)
		if got := live(s.ID); got != "u1 a1 u2 a2" {
			t.Fatalf("a refused request changed the session: %s", got)
		}
	})
}

// An inclusive rewind hides the message itself too (a chat's /undo), and
// the models route says what the session's agent allows and what the
// session runs on, its overrides first.
func TestUndoRewindAndModelsRoute(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open)
		ctx := context.Background()
		s := e.createSession(t, `{}`)
		base := "/v1/sessions/" + string(s.ID)
		u1, err := e.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "a1"}); err != nil {
			t.Fatal(err)
		}
		r := e.do(t, "POST", base+"/rewind", `{"message_id":"`+string(u1.ID)+`","inclusive":true}`)
		var res sessions.RewindResult
		if r.status != 200 {
			t.Fatalf("rewind: %d %s", r.status, r.body)
		}
		r.decode(t, &res)
		if res.Hidden != 2 {
			t.Fatalf("inclusive rewind hid %d, want 2", res.Hidden)
		}

		var m api.ModelsResponse
		r = e.do(t, "GET", base+"/models", "")
		r.decode(t, &m)
		if r.status != 200 || strings.Join(m.Models, ",") != "echo,openai/gpt-4o" || m.Model != "echo" || m.ReasoningEffort != "low" {
			t.Fatalf("models: %d %+v", r.status, m)
		}
		if r := e.do(t, "PATCH", base, `{"model":"openai/gpt-4o","metadata":{"reasoning_effort":"off"}}`); r.status != 200 {
			t.Fatalf("patch: %d %s", r.status, r.body)
		}
		r = e.do(t, "GET", base+"/models", "")
		r.decode(t, &m)
		if m.Model != "openai/gpt-4o" || m.ReasoningEffort != "off" {
			t.Fatalf("models after the override: %+v", m)
		}
		if r := e.do(t, "GET", "/v1/sessions/01900000-0000-7000-8000-000000000000/models", ""); r.status != 404 {
			t.Fatalf("models of a missing session: %d", r.status)
		}
	})
}

// POST /v1/sessions opens parley's own terminal sessions beside a running
// daemon, as in process: cli:chat (one active per person) and
// cli:run:<time>; anything else is refused and creates nothing.
func TestCreateCLISessions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open)
		for _, tc := range []struct {
			body   string
			status int
			key    string
		}{
			{`{"surface":"cli","surface_id":"chat","user":"ann"}`, 201, "cli:chat"},
			{`{"surface":"cli","surface_id":"chat","user":"ann"}`, 409, ""},
			{`{"surface":"cli","surface_id":"run:20260101T000000.000Z","user":"ann"}`, 201, "cli:run:20260101T000000.000Z"},
			{`{"surface":"cli","surface_id":"chat"}`, 400, ""},
			{`{"surface":"cli","surface_id":"elsewhere","user":"ann"}`, 400, ""},
			{`{"surface":"cli","surface_id":"run:","user":"ann"}`, 400, ""},
			{`{"surface":"telegram","surface_id":"42","user":"ann"}`, 400, ""},
			{`{"surface_id":"chat"}`, 400, ""},
		} {
			r := e.do(t, "POST", "/v1/sessions", tc.body)
			if r.status != tc.status {
				t.Fatalf("%s: %d %s, want %d", tc.body, r.status, r.body, tc.status)
			}
			if tc.key != "" {
				var s sessions.Session
				r.decode(t, &s)
				if s.Key.String() != tc.key || s.Key.UserID != "ann" {
					t.Fatalf("%s: key %+v", tc.body, s.Key)
				}
			}
		}
		page, err := e.store.List(context.Background(), sessions.ListOptions{Limit: 10})
		if err != nil || len(page.Sessions) != 2 {
			t.Fatalf("sessions %d, %v; want the two created", len(page.Sessions), err)
		}
	})
}
