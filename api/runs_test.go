package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

func TestRunRoutes(t *testing.T) {
	e := newEnv(t, dbtest.SQLite)
	s := e.createSession(t, `{"user":"u1"}`)
	base := "/v1/sessions/" + string(s.ID)
	missing := "/v1/sessions/01900000-0000-7000-8000-000000000000"

	t.Run("send", func(t *testing.T) {
		r := e.do(t, "POST", base+"/messages", `{"content":"hi","model":"echo","files":[{"id":"f1","name":"a.png"}]}`)
		if r.status != 202 {
			t.Fatalf("send: %d %s", r.status, r.body)
		}
		var res api.SendMessageResponse
		r.decode(t, &res)
		if res.RunID == "" || res.SessionID != s.ID {
			t.Fatalf("send response %+v", res)
		}
		got := e.runner.sent[len(e.runner.sent)-1]
		if got.Content != "hi" || got.Model != "echo" || len(got.Files) != 1 || got.Files[0].ID != "f1" || got.IfIdle {
			t.Fatalf("runner got %+v", got)
		}
	})
	t.Run("send if_idle while busy", func(t *testing.T) {
		e.runner.setBusy(s.ID, true)
		defer e.runner.setBusy(s.ID, false)
		n := len(e.runner.sent)
		for _, tc := range []struct{ q, body string }{
			{"?if_idle=true", `{"content":"hi"}`},
			{"", `{"content":"hi","if_idle":true}`},
		} {
			r := e.do(t, "POST", base+"/messages"+tc.q, tc.body)
			if r.status != 409 || r.errorCode(t) != api.CodeBusy {
				t.Fatalf("%s %s: %d %s", tc.q, tc.body, r.status, r.body)
			}
		}
		if len(e.runner.sent) != n {
			t.Fatal("a refused message reached the runner")
		}
		// Without if_idle, it queues.
		if r := e.do(t, "POST", base+"/messages", `{"content":"queued"}`); r.status != 202 {
			t.Fatalf("queued send: %d %s", r.status, r.body)
		}
	})
	t.Run("send errors", func(t *testing.T) {
		for _, tc := range []struct {
			name, path, body string
			status           int
		}{
			{"missing session", missing + "/messages", `{"content":"hi"}`, 404},
			{"empty content", base + "/messages", `{"content":"  "}`, 400},
			{"no body", base + "/messages", ``, 400},
			{"bad json", base + "/messages", `{"content":"hi"`, 400},
			{"unknown field", base + "/messages", `{"text":"hi"}`, 400},
			{"file without id", base + "/messages", `{"content":"hi","files":[{"name":"x"}]}`, 400},
			{"bad if_idle", base + "/messages?if_idle=perhaps", `{"content":"hi"}`, 400},
			{"too large", base + "/messages", `{"content":"` + strings.Repeat("x", 1<<20) + `"}`, 413},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, "POST", tc.path, tc.body)
				if r.status != tc.status {
					t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
				}
				r.errorCode(t)
			})
		}
	})
	t.Run("send to archived session", func(t *testing.T) {
		old := e.createSession(t, `{}`)
		if _, err := e.store.Reset(t.Context(), old.Key); err != nil {
			t.Fatal(err)
		}
		r := e.do(t, "POST", "/v1/sessions/"+string(old.ID)+"/messages", `{"content":"hi"}`)
		if r.status != 409 || r.errorCode(t) != api.CodeConflict {
			t.Fatalf("archived: %d %s", r.status, r.body)
		}
	})
	t.Run("status", func(t *testing.T) {
		var st api.Status
		e.do(t, "GET", base+"/status", "").decode(t, &st)
		if st.State != api.StateIdle || !st.StartedAt.IsZero() {
			t.Fatalf("idle status %+v", st)
		}
		e.runner.setBusy(s.ID, true)
		defer e.runner.setBusy(s.ID, false)
		r := e.do(t, "GET", base+"/status", "")
		r.decode(t, &st)
		if st.State != api.StateBusy || st.StartedAt.IsZero() || !strings.Contains(string(r.body), `"started_at"`) {
			t.Fatalf("busy status %s", r.body)
		}
		if r := e.do(t, "GET", missing+"/status", ""); r.status != 404 {
			t.Fatalf("missing: %d", r.status)
		}
	})
	t.Run("abort", func(t *testing.T) {
		var res api.AbortResponse
		e.do(t, "POST", base+"/abort", "").decode(t, &res)
		if res.Aborted {
			t.Fatal("aborted an idle session")
		}
		e.runner.setBusy(s.ID, true)
		defer e.runner.setBusy(s.ID, false)
		if r := e.do(t, "POST", base+"/abort", ""); r.status != 200 {
			t.Fatalf("abort: %d %s", r.status, r.body)
		} else if r.decode(t, &res); !res.Aborted {
			t.Fatal("busy session not aborted")
		}
		if r := e.do(t, "POST", missing+"/abort", ""); r.status != 404 {
			t.Fatalf("missing: %d", r.status)
		}
	})
	t.Run("compact", func(t *testing.T) {
		var res api.CompactResult
		if r := e.do(t, "POST", base+"/compact", ""); r.status != 200 {
			t.Fatalf("compact: %d %s", r.status, r.body)
		} else if r.decode(t, &res); !res.Compacted || res.Archived != 3 {
			t.Fatalf("compact result %+v", res)
		}
		if r := e.do(t, "POST", base+"/compact", `{"x":1}`); r.status != 400 {
			t.Fatalf("compact bad body: %d", r.status)
		}
		if r := e.do(t, "POST", missing+"/compact", ""); r.status != 404 {
			t.Fatalf("missing: %d", r.status)
		}
		for _, tc := range []struct {
			err    error
			status int
			code   string
		}{
			{fmt.Errorf("compact: %w", api.ErrBusy), 409, api.CodeBusy},
			{fmt.Errorf("nothing to compact: %w", api.ErrRejected), 422, api.CodeUnprocessable},
			{fmt.Errorf("db password=hunter2 exploded"), 500, api.CodeInternal},
		} {
			e.runner.compactErr = tc.err
			r := e.do(t, "POST", base+"/compact", "")
			if r.status != tc.status || r.errorCode(t) != tc.code {
				t.Errorf("%v: %d %s", tc.err, r.status, r.body)
			}
			if strings.Contains(string(r.body), "hunter2") {
				t.Error("an internal error leaked into the response")
			}
		}
		e.runner.compactErr = nil
	})
	t.Run("reset", func(t *testing.T) {
		tg := sessions.ChatKey("telegram", "42", "u9", "main")
		old, _, err := e.store.Resolve(t.Context(), tg, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{
			`{"session_id":"` + string(old.ID) + `"}`,
			`{"session_key":"telegram:42","user_id":"u9"}`,
			`{"surface":"telegram","surface_id":"42","user_id":"u9","agent_id":"main"}`,
		} {
			r := e.do(t, "POST", "/v1/agent/reset", body)
			if r.status != 200 {
				t.Fatalf("%s: %d %s", body, r.status, r.body)
			}
			var res api.ResetResponse
			r.decode(t, &res)
			if res.Session.ID == old.ID || res.Session.Key != tg || res.Session.Status != sessions.StatusActive {
				t.Fatalf("%s: new session %+v", body, res.Session)
			}
			prev, err := e.store.Session(t.Context(), old.ID)
			if err != nil || prev.Status != sessions.StatusArchived {
				t.Fatalf("old session %+v %v", prev, err)
			}
			old = res.Session
		}
		if got := e.runner.resets[len(e.runner.resets)-1]; got != tg {
			t.Fatalf("runner reset %+v", got)
		}
		for _, tc := range []struct {
			body   string
			status int
		}{
			{`{}`, 400},
			{``, 400},
			{`{"session_key":"telegram"}`, 400},
			{`{"session_id":"x","session_key":"telegram:1"}`, 400},
			{`{"surface":"telegram"}`, 400},
			{`{"session_id":"01900000-0000-7000-8000-000000000000"}`, 404},
			{`{"session_key":"telegram:1","bogus":1}`, 400},
		} {
			if r := e.do(t, "POST", "/v1/agent/reset", tc.body); r.status != tc.status {
				t.Errorf("%s: %d %s", tc.body, r.status, r.body)
			} else {
				r.errorCode(t)
			}
		}
	})
	t.Run("no runner", func(t *testing.T) {
		h := api.New(api.Options{Store: e.store, Tokens: []string{token}})
		for _, p := range []string{base + "/status", base + "/abort"} {
			method := "GET"
			if strings.HasSuffix(p, "abort") {
				method = "POST"
			}
			rec := serve(t, h, method, p, "")
			if rec.Code != 503 {
				t.Errorf("%s: %d", p, rec.Code)
			}
		}
	})
}
