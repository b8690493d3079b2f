package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
)

func newMemoryEnv(t *testing.T, open dbtest.Opener) (*env, *memory.Store) {
	t.Helper()
	db := open(t)
	idx, err := memory.NewBuiltin(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewStore(db, idx)
	h := api.New(api.Options{
		Store: sessions.NewStore(db), Memory: mem, Tokens: []string{token},
		DefaultAgent: "main", KnownAgent: func(id string) bool { return id == "main" || id == "helper" },
	})
	srv := newAPIServer(t, h)
	t.Cleanup(srv.Close)
	return &env{srv: srv}, mem
}

func TestMemoryRoutes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e, mem := newMemoryEnv(t, open)
		ctx := context.Background()
		// What the agent wrote in a Telegram session is found through the
		// API under the scope memory.ScopeOf gives that session.
		key := sessions.Key{AgentID: "main", Surface: "telegram", SurfaceID: "42", UserID: "42"}
		if _, err := mem.Write(ctx, memory.ScopeOf(key), memory.Memory{Content: "The user's cat is called Miso"}); err != nil {
			t.Fatal(err)
		}

		r := e.do(t, "POST", "/v1/memory", `{"agent":"main","user":"user:telegram:42","content":"  Prefers tea over coffee ","tags":["drinks"]}`)
		if r.status != http.StatusCreated {
			t.Fatalf("write: %d %s", r.status, r.body)
		}
		var it memory.Item
		r.decode(t, &it)
		if it.ID == "" || it.Content != "Prefers tea over coffee" || it.Scope != memory.ScopeOf(key) || len(it.Tags) != 1 {
			t.Fatalf("written %+v", it)
		}

		search := func(q url.Values) response {
			return e.do(t, "GET", "/v1/memory/search?"+q.Encode(), "")
		}
		r = search(url.Values{"q": {"tea"}, "user": {"user:telegram:42"}, "agent": {"main"}})
		var res api.MemorySearchResponse
		r.decode(t, &res)
		if r.status != http.StatusOK || len(res.Results) != 1 || res.Results[0].ID != it.ID {
			t.Fatalf("search tea: %d %s", r.status, r.body)
		}
		// The agent defaults to the default agent.
		r = search(url.Values{"q": {"cat"}, "user": {"user:telegram:42"}})
		res = api.MemorySearchResponse{}
		r.decode(t, &res)
		if r.status != http.StatusOK || len(res.Results) != 1 || !strings.Contains(res.Results[0].Content, "Miso") {
			t.Fatalf("search cat: %d %s", r.status, r.body)
		}
		// Scopes never mix: another surface's user 42, another agent, a
		// workspace.
		for _, q := range []url.Values{
			{"q": {"cat tea"}, "user": {"user:discord:42"}},
			{"q": {"cat tea"}, "user": {"user:telegram:42"}, "agent": {"helper"}},
			{"q": {"cat tea"}, "user": {"user:telegram:42"}, "workspace": {"w1"}},
		} {
			r = search(q)
			if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) == "" || strings.Contains(string(r.body), `"id"`) {
				t.Fatalf("search %v: %d %s", q, r.status, r.body)
			}
			res = api.MemorySearchResponse{}
			r.decode(t, &res)
			if res.Results == nil || len(res.Results) != 0 {
				t.Fatalf("search %v: results %s, want []", q, r.body)
			}
		}
		// limit
		for range 3 {
			if r := e.do(t, "POST", "/v1/memory", `{"user":"group:telegram:-1001","content":"the group meets on fridays"}`); r.status != http.StatusCreated {
				t.Fatalf("group write: %d %s", r.status, r.body)
			}
		}
		r = search(url.Values{"q": {"fridays"}, "user": {"group:telegram:-1001"}, "limit": {"2"}})
		res = api.MemorySearchResponse{}
		r.decode(t, &res)
		if len(res.Results) != 2 {
			t.Fatalf("limit 2: %s", r.body)
		}
	})
}

func TestMemoryRouteErrors(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e, _ := newMemoryEnv(t, open)
		long := strings.Repeat("x", memory.MaxContentRunes+1)
		for _, tc := range []struct {
			name, method, path, body string
			want                     int
			msg                      string
		}{
			{"search without q", "GET", "/v1/memory/search?user=user:telegram:42", "", 400, "q is required"},
			{"search without user", "GET", "/v1/memory/search?q=x", "", 400, "user is required"},
			{"search with a bare user id", "GET", "/v1/memory/search?q=x&user=42", "", 400, "user:telegram:42"},
			{"search with a bad kind", "GET", "/v1/memory/search?q=x&user=person:telegram:42", "", 400, "not a scope's user"},
			{"search with no surface", "GET", "/v1/memory/search?q=x&user=user::42", "", 400, "not a scope's user"},
			{"search with an unknown agent", "GET", "/v1/memory/search?q=x&user=user:telegram:42&agent=ghost", "", 400, "unknown agent"},
			{"search limit 0", "GET", "/v1/memory/search?q=x&user=user:telegram:42&limit=0", "", 400, "limit must be"},
			{"search limit too big", "GET", "/v1/memory/search?q=x&user=user:telegram:42&limit=21", "", 400, "limit must be"},
			{"search limit not a number", "GET", "/v1/memory/search?q=x&user=user:telegram:42&limit=ten", "", 400, "limit must be"},
			{"write empty body", "POST", "/v1/memory", "", 400, "empty"},
			{"write bad json", "POST", "/v1/memory", `{"user":`, 400, "invalid JSON"},
			{"write unknown field", "POST", "/v1/memory", `{"user":"user:telegram:42","content":"x","scope":"y"}`, 400, "unknown field"},
			{"write without user", "POST", "/v1/memory", `{"content":"x"}`, 400, "user is required"},
			{"write without content", "POST", "/v1/memory", `{"user":"user:telegram:42","content":"  "}`, 400, "content is empty"},
			{"write too long", "POST", "/v1/memory", `{"user":"user:telegram:42","content":"` + long + `"}`, 400, "limit is 8000"},
			{"write too many tags", "POST", "/v1/memory", `{"user":"user:telegram:42","content":"x","tags":["1","2","3","4","5","6","7","8","9","10","11"]}`, 400, "tags"},
			{"write an empty tag", "POST", "/v1/memory", `{"user":"user:telegram:42","content":"x","tags":[" "]}`, 400, "tag 1 is empty"},
			{"write with a NUL in the user", "POST", "/v1/memory", `{"user":"user:telegram:4\u00002","content":"x"}`, 400, "UTF-8"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, tc.method, tc.path, tc.body)
				if r.status != tc.want || r.errorCode(t) != api.CodeBadRequest || !strings.Contains(string(r.body), tc.msg) {
					t.Fatalf("%d %s, want %d with %q", r.status, r.body, tc.want, tc.msg)
				}
			})
		}
		t.Run("too large", func(t *testing.T) {
			r := e.do(t, "POST", "/v1/memory", `{"user":"user:telegram:42","content":"`+strings.Repeat("x", api.DefaultMaxBody)+`"}`)
			if r.status != http.StatusRequestEntityTooLarge || r.errorCode(t) != api.CodeTooLarge {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
		t.Run("needs auth", func(t *testing.T) {
			if r := e.doAuth(t, "GET", "/v1/memory/search?q=x&user=user:telegram:42", "", ""); r.status != http.StatusUnauthorized {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	})
	t.Run("no memory store", func(t *testing.T) {
		e := newEnv(t, dbtest.SQLite)
		for _, r := range []response{
			e.do(t, "GET", "/v1/memory/search?q=x&user=user:telegram:42", ""),
			e.do(t, "POST", "/v1/memory", `{"user":"user:telegram:42","content":"x"}`),
		} {
			if r.status != http.StatusServiceUnavailable || r.errorCode(t) != api.CodeUnavailable {
				t.Fatalf("%d %s", r.status, r.body)
			}
		}
	})
}
