package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// A session's title and metadata are capped (200 characters, 16 KB by
// default), on create and on patch (the merged metadata counts), with a
// 400 naming the limit and its config key; a title at the limit fits.
func TestSessionFieldLimits(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open)
		s := e.createSession(t, `{"title":"`+strings.Repeat("é", 200)+`"}`)
		big := func(n int) string { return `{"blob":"` + strings.Repeat("x", n) + `"}` }
		for _, tc := range []struct {
			name, method, path, body, want string
		}{
			{"a long title", "POST", "/v1/sessions", `{"title":"` + strings.Repeat("é", 201) + `"}`, "title is 201 characters; the limit is 200 (http.max_title_chars)"},
			{"a 900 KB title", "POST", "/v1/sessions", `{"title":"` + strings.Repeat("t", 900<<10) + `"}`, "the limit is 200"},
			{"large metadata", "POST", "/v1/sessions", `{"metadata":` + big(16<<10) + `}`, "the limit is 16384 (http.max_metadata_bytes)"},
			{"a long title, patched", "PATCH", "/v1/sessions/" + string(s.ID), `{"title":"` + strings.Repeat("t", 201) + `"}`, "the limit is 200"},
			{"large metadata, patched", "PATCH", "/v1/sessions/" + string(s.ID), `{"metadata":` + big(16<<10) + `}`, "the limit is 16384"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, tc.method, tc.path, tc.body)
				if r.status != 400 || r.errorCode(t) != "bad_request" || !strings.Contains(string(r.body), tc.want) {
					t.Fatalf("%d %.300s, want 400 with %q", r.status, r.body, tc.want)
				}
			})
		}
		// Patches that each fit but together don't: the merged metadata counts.
		for i, key := range []string{"a", "b"} {
			r := e.do(t, "PATCH", "/v1/sessions/"+string(s.ID), `{"metadata":{"`+key+`":"`+strings.Repeat("x", 9000)+`"}}`)
			if want := []int{200, 400}[i]; r.status != want {
				t.Fatalf("patch %s: %d %.200s, want %d", key, r.status, r.body, want)
			}
		}
		// Removing a key makes room again.
		if r := e.do(t, "PATCH", "/v1/sessions/"+string(s.ID), `{"metadata":{"a":null,"b":"`+strings.Repeat("x", 9000)+`"}}`); r.status != 200 {
			t.Fatalf("patch replacing a key: %d %.200s", r.status, r.body)
		}
	})
}

// A model override no provider takes is refused with 400 naming the known
// providers, wherever it is given: on a message, a new session, a patch,
// or in metadata.
func TestBadModelOverride(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open)
		s := e.createSession(t, `{}`)
		for _, tc := range []struct{ name, method, path, body string }{
			{"a message", "POST", "/v1/sessions/" + string(s.ID) + "/messages", `{"content":"hi","model":"/"}`},
			{"a new session", "POST", "/v1/sessions", `{"model":"gpt/4"}`},
			{"a new session's metadata", "POST", "/v1/sessions", `{"metadata":{"model":"/"}}`},
			{"a patch", "PATCH", "/v1/sessions/" + string(s.ID), `{"model":"/"}`},
			{"a patch's metadata", "PATCH", "/v1/sessions/" + string(s.ID), `{"metadata":{"model":"nope/x"}}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, tc.method, tc.path, tc.body)
				if r.status != 400 || r.errorCode(t) != "bad_request" ||
					!strings.Contains(string(r.body), "echo") || !strings.Contains(string(r.body), "openai/") || !strings.Contains(string(r.body), "anthropic/") {
					t.Fatalf("%d %s, want 400 naming the providers", r.status, r.body)
				}
			})
		}
		// A provider without a model name says how to write one.
		if r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/messages", `{"content":"hi","model":"openai"}`); r.status != 400 ||
			!strings.Contains(string(r.body), "openai needs a model name") {
			t.Fatalf("no model name: %d %s", r.status, r.body)
		}
		// Good overrides pass.
		if r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/messages", `{"content":"hi","model":"openai/gpt-4o-mini"}`); r.status != 202 {
			t.Fatalf("a good model: %d %s", r.status, r.body)
		}
		if r := e.do(t, "PATCH", "/v1/sessions/"+string(s.ID), `{"model":""}`); r.status != 200 {
			t.Fatalf("removing the override: %d %s", r.status, r.body)
		}
		var got map[string]any
		_ = json.Unmarshal(e.do(t, "GET", "/v1/sessions/"+string(s.ID), "").body, &got)
		if got["id"] != string(s.ID) {
			t.Fatalf("session %v", got)
		}
	})
}

// A message's reasoning effort is low, medium or high; anything else is
// 400 naming them.
func TestBadReasoningEffort(t *testing.T) {
	e := newEnv(t, func(t testing.TB) *dbutil.DB { return dbtest.SQLite(t) })
	s := e.createSession(t, `{}`)
	if r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/messages", `{"content":"hi","reasoning_effort":"extreme"}`); r.status != 400 ||
		!strings.Contains(string(r.body), "low, medium or high") {
		t.Fatalf("a bad effort: %d %s", r.status, r.body)
	}
	if r := e.do(t, "POST", "/v1/sessions/"+string(s.ID)+"/messages", `{"content":"hi","reasoning_effort":"high"}`); r.status != 202 {
		t.Fatalf("a good effort: %d %s", r.status, r.body)
	}
}
