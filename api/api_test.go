package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

func TestAuth(t *testing.T) {
	e := newEnv(t, dbtest.SQLite)
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong token", "Bearer nope", http.StatusUnauthorized},
		{"prefix of a token", "Bearer " + token[:5], http.StatusUnauthorized},
		{"basic scheme", "Basic " + token, http.StatusUnauthorized},
		{"empty bearer", "Bearer ", http.StatusUnauthorized},
		{"first token", "Bearer " + token, http.StatusOK},
		{"second token", "Bearer " + token2, http.StatusOK},
		{"scheme case", "bearer " + token, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.doAuth(t, "GET", "/v1/sessions", "", tc.auth)
			if r.status != tc.want {
				t.Fatalf("status %d, want %d: %s", r.status, tc.want, r.body)
			}
			if tc.want == http.StatusUnauthorized {
				if code := r.errorCode(t); code != api.CodeUnauthorized {
					t.Fatalf("code %q", code)
				}
				if strings.Contains(string(r.body), token) {
					t.Fatal("the error echoes a token")
				}
			}
		})
	}
	t.Run("unknown route needs auth too", func(t *testing.T) {
		if r := e.doAuth(t, "GET", "/v1/nope", "", ""); r.status != http.StatusUnauthorized {
			t.Fatalf("status %d", r.status)
		}
		r := e.do(t, "GET", "/v1/nope", "")
		if r.status != http.StatusNotFound || r.errorCode(t) != api.CodeNotFound {
			t.Fatalf("unknown route: %d %s", r.status, r.body)
		}
	})
	t.Run("no tokens configured", func(t *testing.T) {
		h := api.New(api.Options{Store: e.store})
		req, _ := http.NewRequest("GET", "/v1/sessions", nil)
		req.Header.Set("Authorization", "Bearer ")
		rec := serveChecked(t, h, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("status %d", rec.Code)
		}
		// It says the API is off and how to turn it on, not that the
		// token was wrong: the web chat shows it.
		if !strings.Contains(rec.Body.String(), "this parley has no API token") || !strings.Contains(rec.Body.String(), "parley init") {
			t.Fatalf("the refusal with no tokens configured: %s", rec.Body.String())
		}
	})
	t.Run("a wrong token is told where tokens are", func(t *testing.T) {
		r := e.doAuth(t, "GET", "/v1/sessions", "", "Bearer nope")
		if !strings.Contains(string(r.body), "use one of http.tokens") {
			t.Fatalf("a wrong token's refusal: %s", r.body)
		}
	})
}

func TestSessionRoutes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open)
		s := e.createSession(t, `{"agent":"main","title":"first","model":"echo","user":"u1","metadata":{"k":"v"}}`)
		if s.Key.Surface != sessions.SurfaceAPI || s.Key.AgentID != "main" || s.Title != "first" || s.Key.UserID != "u1" {
			t.Fatalf("created %+v", s)
		}
		if !strings.Contains(string(s.Metadata), `"model"`) || !strings.Contains(string(s.Metadata), `"k"`) {
			t.Fatalf("metadata %s", s.Metadata)
		}
		def := e.createSession(t, ``) // every field optional: the default agent
		if def.Key.AgentID != "main" {
			t.Fatalf("default agent %q", def.Key.AgentID)
		}
		helper := e.createSession(t, `{"agent":"helper","user":"u2"}`)

		errCases := []struct {
			name, method, path, body string
			status                   int
			code                     string
			msg                      string
		}{
			{"create unknown agent", "POST", "/v1/sessions", `{"agent":"ghost"}`, 400, api.CodeBadRequest, "unknown agent"},
			{"create bad json", "POST", "/v1/sessions", `{"agent":`, 400, api.CodeBadRequest, "invalid JSON"},
			{"create wrong type", "POST", "/v1/sessions", `{"title":5}`, 400, api.CodeBadRequest, "title"},
			{"create unknown field", "POST", "/v1/sessions", `{"agnet":"main"}`, 400, api.CodeBadRequest, "agnet"},
			{"create trailing data", "POST", "/v1/sessions", `{} {}`, 400, api.CodeBadRequest, "after the object"},
			{"create metadata not object", "POST", "/v1/sessions", `{"metadata":[1]}`, 400, api.CodeBadRequest, "metadata"},
			{"create too large", "POST", "/v1/sessions", `{"title":"` + strings.Repeat("x", api.DefaultMaxBody) + `"}`, 413, api.CodeTooLarge, "1 MiB"},
			{"list limit 0", "GET", "/v1/sessions?limit=0", "", 400, api.CodeBadRequest, "limit"},
			{"list limit 201", "GET", "/v1/sessions?limit=201", "", 400, api.CodeBadRequest, "limit"},
			{"list bad cursor", "GET", "/v1/sessions?cursor=zzz", "", 400, api.CodeBadRequest, "cursor"},
			{"list bad status", "GET", "/v1/sessions?status=gone", "", 400, api.CodeBadRequest, "status"},
			{"get missing", "GET", "/v1/sessions/01900000-0000-7000-8000-000000000000", "", 404, api.CodeNotFound, "not found"},
			{"patch missing", "PATCH", "/v1/sessions/01900000-0000-7000-8000-000000000000", `{"title":"x"}`, 404, api.CodeNotFound, "not found"},
			{"patch bad json", "PATCH", "/v1/sessions/" + string(s.ID), `{"title":`, 400, api.CodeBadRequest, "invalid JSON"},
			{"patch empty body", "PATCH", "/v1/sessions/" + string(s.ID), ``, 400, api.CodeBadRequest, "empty"},
			{"patch unknown field", "PATCH", "/v1/sessions/" + string(s.ID), `{"status":"archived"}`, 400, api.CodeBadRequest, "status"},
			{"patch unknown agent", "PATCH", "/v1/sessions/" + string(s.ID), `{"agent":"ghost"}`, 400, api.CodeBadRequest, "unknown agent"},
			{"patch too large", "PATCH", "/v1/sessions/" + string(s.ID), `{"title":"` + strings.Repeat("x", api.DefaultMaxBody) + `"}`, 413, api.CodeTooLarge, ""},
			{"delete missing", "DELETE", "/v1/sessions/01900000-0000-7000-8000-000000000000", "", 404, api.CodeNotFound, ""},
		}
		for _, tc := range errCases {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, tc.method, tc.path, tc.body)
				if r.status != tc.status {
					t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
				}
				if code := r.errorCode(t); code != tc.code {
					t.Fatalf("code %q, want %q", code, tc.code)
				}
				if !strings.Contains(string(r.body), tc.msg) {
					t.Fatalf("message %s lacks %q", r.body, tc.msg)
				}
			})
		}

		t.Run("list and filter", func(t *testing.T) {
			var page sessions.Page
			r := e.do(t, "GET", "/v1/sessions?limit=2", "")
			r.decode(t, &page)
			if r.status != 200 || len(page.Sessions) != 2 || page.Next == "" || page.Sessions[0].ID != helper.ID {
				t.Fatalf("page 1: %d %s", r.status, r.body)
			}
			var page2 sessions.Page
			e.do(t, "GET", "/v1/sessions?limit=2&cursor="+page.Next, "").decode(t, &page2)
			if len(page2.Sessions) != 1 || page2.Next != "" || page2.Sessions[0].ID != s.ID {
				t.Fatalf("page 2: %+v", page2)
			}
			for _, f := range []struct {
				q    string
				want []sessions.ID
			}{
				{"agent=helper", []sessions.ID{helper.ID}},
				{"user=u1", []sessions.ID{s.ID}},
				{"surface=api&status=active", []sessions.ID{helper.ID, def.ID, s.ID}},
				{"surface=telegram", nil},
				{"status=archived", nil},
			} {
				var p sessions.Page
				e.do(t, "GET", "/v1/sessions?"+f.q, "").decode(t, &p)
				var got []sessions.ID
				for _, x := range p.Sessions {
					got = append(got, x.ID)
				}
				if fmt.Sprint(got) != fmt.Sprint(f.want) {
					t.Errorf("%s: got %v, want %v", f.q, got, f.want)
				}
			}
		})

		t.Run("get patch delete", func(t *testing.T) {
			var got sessions.Session
			if r := e.do(t, "GET", "/v1/sessions/"+string(s.ID), ""); r.status != 200 {
				t.Fatalf("get: %d %s", r.status, r.body)
			} else {
				r.decode(t, &got)
			}
			if got.ID != s.ID || got.Title != "first" {
				t.Fatalf("get %+v", got)
			}
			r := e.do(t, "PATCH", "/v1/sessions/"+string(s.ID), `{"title":"renamed","agent":"helper","model":"openai/gpt-4o"}`)
			if r.status != 200 {
				t.Fatalf("patch: %d %s", r.status, r.body)
			}
			r.decode(t, &got)
			if got.Title != "renamed" || got.Key.AgentID != "helper" || !strings.Contains(string(got.Metadata), "openai/gpt-4o") {
				t.Fatalf("patched %+v %s", got, got.Metadata)
			}
			r = e.do(t, "PATCH", "/v1/sessions/"+string(s.ID), `{"model":""}`)
			r.decode(t, &got)
			if strings.Contains(string(got.Metadata), "model") || !strings.Contains(string(got.Metadata), `"k"`) {
				t.Fatalf("model override not removed: %s", got.Metadata)
			}

			e.runner.setBusy(s.ID, true)
			if r := e.do(t, "PATCH", "/v1/sessions/"+string(s.ID), `{"agent":"main"}`); r.status != 409 || r.errorCode(t) != api.CodeBusy {
				t.Fatalf("patch agent while busy: %d %s", r.status, r.body)
			}
			if r := e.do(t, "DELETE", "/v1/sessions/"+string(s.ID), ""); r.status != 409 || r.errorCode(t) != api.CodeBusy {
				t.Fatalf("delete while busy: %d %s", r.status, r.body)
			}
			e.runner.setBusy(s.ID, false)
			if r := e.do(t, "DELETE", "/v1/sessions/"+string(s.ID), ""); r.status != 204 {
				t.Fatalf("delete: %d %s", r.status, r.body)
			}
			if r := e.do(t, "GET", "/v1/sessions/"+string(s.ID), ""); r.status != 404 {
				t.Fatalf("get after delete: %d", r.status)
			}
		})

		t.Run("archive", func(t *testing.T) {
			a := e.createSession(t, `{"title":"to archive","user":"u3"}`)
			e.runner.setBusy(a.ID, true)
			if r := e.do(t, "POST", "/v1/sessions/"+string(a.ID)+"/archive", ""); r.status != 409 || r.errorCode(t) != api.CodeBusy {
				t.Fatalf("archive while busy: %d %s", r.status, r.body)
			}
			e.runner.setBusy(a.ID, false)
			for i := range 2 { // the second changes nothing
				var got sessions.Session
				r := e.do(t, "POST", "/v1/sessions/"+string(a.ID)+"/archive", "")
				if r.status != 200 {
					t.Fatalf("archive %d: %d %s", i, r.status, r.body)
				}
				r.decode(t, &got)
				if got.ID != a.ID || got.Status != sessions.StatusArchived || got.ArchivedAt.IsZero() || got.Title != "to archive" {
					t.Fatalf("archive %d: %+v", i, got)
				}
			}
			for _, f := range []struct {
				q    string
				want []sessions.ID
			}{{"user=u3&status=active", nil}, {"user=u3&status=archived", []sessions.ID{a.ID}}} {
				var p sessions.Page
				e.do(t, "GET", "/v1/sessions?"+f.q, "").decode(t, &p)
				var got []sessions.ID
				for _, x := range p.Sessions {
					got = append(got, x.ID)
				}
				if fmt.Sprint(got) != fmt.Sprint(f.want) {
					t.Errorf("%s: got %v, want %v", f.q, got, f.want)
				}
			}
			if r := e.do(t, "POST", "/v1/sessions/"+string(a.ID)+"/messages", `{"content":"hi"}`); r.status != 409 {
				t.Fatalf("a message to an archived session: %d %s", r.status, r.body)
			}
			if r := e.do(t, "POST", "/v1/sessions/01900000-0000-7000-8000-000000000000/archive", ""); r.status != 404 || r.errorCode(t) != api.CodeNotFound {
				t.Fatalf("archive a missing session: %d %s", r.status, r.body)
			}

			// Unarchived, it is active again, with its title, and takes
			// messages; a second unarchive changes nothing.
			for i := range 2 {
				var got sessions.Session
				r := e.do(t, "POST", "/v1/sessions/"+string(a.ID)+"/unarchive", "")
				if r.status != 200 {
					t.Fatalf("unarchive %d: %d %s", i, r.status, r.body)
				}
				r.decode(t, &got)
				if got.ID != a.ID || got.Status != sessions.StatusActive || !got.ArchivedAt.IsZero() || got.Title != "to archive" {
					t.Fatalf("unarchive %d: %+v", i, got)
				}
			}
			if r := e.do(t, "POST", "/v1/sessions/"+string(a.ID)+"/messages", `{"content":"hi again"}`); r.status != 202 {
				t.Fatalf("a message to the unarchived session: %d %s", r.status, r.body)
			}
			if r := e.do(t, "POST", "/v1/sessions/01900000-0000-7000-8000-000000000000/unarchive", ""); r.status != 404 || r.errorCode(t) != api.CodeNotFound {
				t.Fatalf("unarchive a missing session: %d %s", r.status, r.body)
			}
		})
	})
}

func TestMessagesRoute(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open)
		ctx := context.Background()
		s := e.createSession(t, `{}`)
		for i := 1; i <= 6; i++ {
			role := sessions.RoleUser
			if i%2 == 0 {
				role = sessions.RoleAssistant
			}
			if _, err := e.store.Append(ctx, s.ID, sessions.Message{Role: role, Content: fmt.Sprintf("m%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		// Compact the first two, then hide one.
		if _, err := e.store.Compact(ctx, s.ID, sessions.CompactInput{Through: 2, Expect: 2, Summary: "sum"}); err != nil {
			t.Fatal(err)
		}
		read := func(q string) ([]string, string) {
			t.Helper()
			r := e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/messages"+q, "")
			if r.status != 200 {
				t.Fatalf("%s: %d %s", q, r.status, r.body)
			}
			var p api.MessagesPage
			r.decode(t, &p)
			var out []string
			for _, m := range p.Messages {
				out = append(out, m.Content)
			}
			return out, p.Next
		}
		all := func(q string) []string {
			var out []string
			cursor := ""
			for range 20 {
				page, next := read(q + "&limit=2&cursor=" + cursor)
				out = append(out, page...)
				if next == "" {
					return out
				}
				cursor = next
			}
			t.Fatal("pagination does not end")
			return nil
		}
		if got := fmt.Sprint(all("?x=1")); got != "[sum m3 m4 m5 m6]" {
			t.Fatalf("live: %s", got)
		}
		if got := fmt.Sprint(all("?include_archived=true")); got != "[m1 m2 sum m3 m4 m5 m6]" {
			t.Fatalf("with archive: %s", got)
		}
		if _, err := e.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "hidden", HiddenAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(all("?x=1")); got != "[sum m3 m4 m5 m6]" {
			t.Fatalf("live after hidden: %s", got)
		}
		if got := fmt.Sprint(all("?include_hidden=true")); got != "[sum m3 m4 m5 m6 hidden]" {
			t.Fatalf("with hidden: %s", got)
		}
		for _, tc := range []struct {
			q      string
			status int
		}{
			{"?limit=0", 400}, {"?limit=500", 400}, {"?include_hidden=maybe", 400}, {"?cursor=!!", 400},
		} {
			if r := e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/messages"+tc.q, ""); r.status != tc.status || r.errorCode(t) != api.CodeBadRequest {
				t.Errorf("%s: %d %s", tc.q, r.status, r.body)
			}
		}
		if r := e.do(t, "GET", "/v1/sessions/01900000-0000-7000-8000-000000000000/messages", ""); r.status != 404 {
			t.Fatalf("missing session: %d %s", r.status, r.body)
		}
	})
}
