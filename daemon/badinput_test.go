package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/client"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/turns"
	"github.com/parleyd/parley/vault"
	"github.com/parleyd/parley/webhooks"
)

// errorLog keeps the daemon's log lines at ERROR.
type errorLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *errorLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bytes.Contains(p, []byte("level=ERROR")) {
		l.lines = append(l.lines, string(p))
	}
	return len(p), nil
}

func (l *errorLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

const badInputHookSecret = "bad-input-hook-secret-0123456789abcdef"

// badInputDaemon runs the daemon on dbURL with the API and a token hook,
// its log at ERROR collected.
func badInputDaemon(t *testing.T, dbURL string) (string, *errorLog) {
	t.Helper()
	key, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(vault.EnvKey, key.Encode()) // so a person's token can be stored
	path := filepath.Join(t.TempDir(), "parley.yaml")
	body := "database:\n  url: " + dbURL + "\ngateway:\n  debounce: 0s\nhttp:\n  tokens: [\"" + apiToken + "\"]\n  callback_secret: bad-input-callback-secret-0123456789abcdef\n" +
		"hooks:\n  - id: ci\n    auth: token\n    secret: " + badInputHookSecret + "\n    prompt: \"CI says {{.message}}\"\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	errs := &errorLog{}
	log := slog.New(slog.NewTextHandler(errs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := build(context.Background(), cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.adapters = map[adapters.ID]adapters.Adapter{
		"api":              turns.APIChannel{},
		webhooks.AdapterID: webhooks.New(webhooks.Options{Hooks: d.cfg().Hooks, DB: d.db, Notify: d.gw.Notify, Log: log}),
	}
	// As parley run serves it: the API, the daemon's own routes and the
	// dashboard.
	hs := httptest.NewServer(httpserve.AppHandler(d.routes(d.APIHandler())))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		d.Close()
	})
	return hs.URL, errs
}

// badTexts are values no route should answer with a 5xx, wherever they go.
var badTexts = []string{
	"a\x00b",
	"\x00",
	"\xff\xfe",
	"\xc3",
	strings.Repeat("é", 100) + "\xc3",
	strings.Repeat("x", 4096),
	strings.Repeat("é", 150),
	"a" + strings.Repeat("é", 150), // cut at 200 bytes, mid-character
	"' OR 1=1 --",
	"%",
	"../../etc/passwd",
	" ",
	"-1",
	"99999999999999999999",
	"\u202e\U0001F600",
	"null",
}

type badRequestCase struct {
	name, method, path string
	header             http.Header
	body               []byte
}

// badInputCases are the malformed requests: every route with bad ids, its
// filters with bad values, its body broken every way, and the hooks with
// bad ids, delivery ids and bodies.
func badInputCases(session string) []badRequestCase {
	var cs []badRequestCase
	add := func(name, method, path string, body []byte, header http.Header) {
		cs = append(cs, badRequestCase{name: name, method: method, path: path, body: body, header: header})
	}
	idRoutes := []struct{ method, suffix string }{
		{"GET", ""}, {"PATCH", ""}, {"DELETE", ""}, {"GET", "/messages"}, {"POST", "/messages"},
		{"GET", "/status"}, {"POST", "/abort"}, {"POST", "/compact"}, {"GET", "/events"},
		{"POST", "/rewind"}, {"POST", "/unrewind"}, {"POST", "/branch"}, {"GET", "/callbacks"},
		{"GET", "/budget"}, {"GET", "/tools"}, {"PUT", "/tools"}, {"POST", "/tool_results"}, {"GET", "/kv"}, {"GET", "/kv/k"},
		{"POST", "/permissions/r1"}, {"GET", "/models"}, {"POST", "/files"}, {"GET", "/files"}, {"GET", "/files/f.csv"}, {"DELETE", "/files/f.csv"},
		{"POST", "/archive"}, {"POST", "/unarchive"}, {"GET", "/sql/schema"}, {"GET", "/hook_events"},
	}
	for _, r := range idRoutes {
		for i, v := range badTexts {
			add(fmt.Sprintf("%s %s id %d", r.method, r.suffix, i), r.method, "/v1/sessions/"+url.PathEscape(v)+r.suffix, []byte(`{}`), nil)
		}
	}
	filters := map[string][]string{
		"/v1/sessions":                          {"status", "surface", "agent", "agent_id", "user", "user_id", "cursor", "limit", "include_ephemeral"},
		"/v1/sessions/" + session + "/messages": {"cursor", "limit", "include_archived", "include_hidden"},
		"/v1/memory/search":                     {"q", "user", "agent", "workspace", "limit"},
		"/v1/sessions/" + session + "/events":   {"run_id", "last_event_id"},
	}
	for path, names := range filters {
		for _, name := range names {
			for i, v := range badTexts {
				q := url.Values{name: {v}}
				if path == "/v1/memory/search" && name != "q" {
					q.Set("q", "hello")
				}
				add(fmt.Sprintf("GET %s ?%s %d", path, name, i), "GET", path+"?"+q.Encode(), nil, nil)
			}
		}
	}
	// Bodies: broken JSON and wrong types, then each string field bad.
	broken := []string{``, `{`, `[]`, `"x"`, `null`, `123`, `{"a":1}{}`, `{"title":1}`, `{"content":{}}`, `{"metadata":"x"}`,
		`{"metadata":[1]}`, `{"files":"x"}`, `{"unknown":true}`, "{\"content\":\"\xff\"}", `{"content":"a\u0000b"}`,
		`{"metadata":{"k\u0000":"v"}}`, strings.Repeat("[", 10000) + strings.Repeat("]", 10000)}
	bodyRoutes := []struct {
		method, path string
		fields       []string
	}{
		{"POST", "/v1/sessions", []string{"agent", "title", "model", "user", "webhook_url", "surface", "surface_id", "workspace"}},
		{"PATCH", "/v1/sessions/" + session, []string{"title", "agent", "model"}},
		{"POST", "/v1/sessions/" + session + "/messages", []string{"content", "model"}},
		{"POST", "/v1/sessions/" + session + "/rewind", []string{"to", "message_id"}},
		{"POST", "/v1/sessions/" + session + "/branch", []string{"from", "message_id", "title"}},
		{"POST", "/v1/agent/reset", []string{"session_id", "agent", "surface", "surface_id", "user"}},
		{"POST", "/v1/memory", []string{"agent", "user", "workspace", "content"}},
	}
	for _, r := range bodyRoutes {
		for i, b := range broken {
			add(fmt.Sprintf("%s %s body %d", r.method, r.path, i), r.method, r.path, []byte(b), nil)
		}
		for _, f := range r.fields {
			for i, v := range badTexts {
				body := fmt.Sprintf(`{%q:%s}`, f, jsonText(v))
				if r.path == "/v1/memory" && f != "content" {
					body = fmt.Sprintf(`{"content":"x",%q:%s}`, f, jsonText(v))
				}
				add(fmt.Sprintf("%s %s .%s %d", r.method, r.path, f, i), r.method, r.path, []byte(body), nil)
			}
		}
	}
	// A session's own names: a kv key, a permission request.
	for i, v := range badTexts {
		add(fmt.Sprintf("GET kv key %d", i), "GET", "/v1/sessions/"+session+"/kv/"+url.PathEscape(v), nil, nil)
		add(fmt.Sprintf("GET file name %d", i), "GET", "/v1/sessions/"+session+"/files/"+url.PathEscape(v), nil, nil)
		add(fmt.Sprintf("DELETE file name %d", i), "DELETE", "/v1/sessions/"+session+"/files/"+url.PathEscape(v), nil, nil)
		add(fmt.Sprintf("POST file body %d", i), "POST", "/v1/sessions/"+session+"/files", []byte(v),
			http.Header{"Content-Type": {"multipart/form-data; boundary=b"}})
		add(fmt.Sprintf("POST permission id %d", i), "POST", "/v1/sessions/"+session+"/permissions/"+url.PathEscape(v), []byte(`{"answer":"once"}`), nil)
	}
	for _, r := range []struct{ method, suffix string }{{"PUT", "/tools"}, {"POST", "/tool_results"}, {"POST", "/permissions/r1"}} {
		for i, b := range broken {
			add(fmt.Sprintf("%s %s body %d", r.method, r.suffix, i), r.method, "/v1/sessions/"+session+r.suffix, []byte(b), nil)
		}
	}
	// A person's own tokens: every part of the path bad, and the body.
	conn := func(surface, user, provider string) string {
		return "/v1/users/" + url.PathEscape(surface) + "/" + url.PathEscape(user) + "/connections/" + url.PathEscape(provider)
	}
	for i, v := range badTexts {
		for _, m := range []string{"PUT", "DELETE"} {
			add(fmt.Sprintf("%s connection surface %d", m, i), m, conn(v, "42", "github"), []byte(`{"token":"t"}`), nil)
			add(fmt.Sprintf("%s connection user %d", m, i), m, conn("telegram", v, "github"), []byte(`{"token":"t"}`), nil)
			add(fmt.Sprintf("%s connection provider %d", m, i), m, conn("telegram", "42", v), []byte(`{"token":"t"}`), nil)
		}
		add(fmt.Sprintf("PUT connection token %d", i), "PUT", conn("telegram", "42", "github"), []byte(`{"token":`+jsonText(v)+`}`), nil)
	}
	for i, b := range broken {
		add(fmt.Sprintf("PUT connection body %d", i), "PUT", conn("telegram", "42", "github"), []byte(b), nil)
	}
	// The daemon's own reads, MCP, and the dashboard (with the bearer token).
	add("GET status", "GET", "/v1/status", nil, nil)
	add("GET replicas", "GET", "/v1/replicas", nil, nil)
	for i, v := range badTexts {
		add(fmt.Sprintf("GET openapi query %d", i), "GET", "/v1/openapi.json?v="+url.QueryEscape(v), nil, nil)
	}
	for i, b := range broken {
		add(fmt.Sprintf("mcp body %d", i), "POST", "/mcp", []byte(b), http.Header{"Accept": {"application/json, text/event-stream"}})
	}
	for _, page := range []string{"/admin", "/admin/sessions", "/admin/runs", "/admin/cron", "/admin/hooks", "/admin/pairing", "/admin/outbox"} {
		add("GET "+page, "GET", page, nil, nil)
	}
	for i, v := range badTexts {
		for _, name := range []string{"cursor", "status", "surface", "agent", "q"} {
			add(fmt.Sprintf("admin sessions ?%s %d", name, i), "GET", "/admin/sessions?"+url.Values{name: {v}}.Encode(), nil, nil)
		}
		add(fmt.Sprintf("admin session id %d", i), "GET", "/admin/sessions/"+url.PathEscape(v), nil, nil)
		add(fmt.Sprintf("admin abort id %d", i), "POST", "/admin/runs/"+url.PathEscape(v)+"/abort", nil, nil)
		add(fmt.Sprintf("admin cron id %d", i), "POST", "/admin/cron/"+url.PathEscape(v)+"/run", nil, nil)
		add(fmt.Sprintf("admin cron action %d", i), "POST", "/admin/cron/x/"+url.PathEscape(v), nil, nil)
		add(fmt.Sprintf("admin pairing code %d", i), "POST", "/admin/pairing/"+url.PathEscape(v)+"/approve", nil, nil)
		add(fmt.Sprintf("admin pairing decision %d", i), "POST", "/admin/pairing/x/"+url.PathEscape(v), nil, nil)
		add(fmt.Sprintf("admin outbox id %d", i), "POST", "/admin/outbox/"+url.PathEscape(v)+"/retry", nil, nil)
	}
	// The hooks.
	auth := http.Header{"Authorization": {"Bearer " + badInputHookSecret}}
	for i, v := range badTexts {
		add(fmt.Sprintf("hook id %d", i), "POST", "/hooks/"+url.PathEscape(v), []byte(`{"message":"x"}`), auth)
	}
	for i, v := range badTexts {
		if strings.IndexByte(v, 0) >= 0 {
			continue // no client sends a NUL in a header
		}
		for _, k := range []string{"X-Parley-Delivery", "X-GitHub-Delivery", "Idempotency-Key"} {
			h := auth.Clone()
			h.Set(k, v)
			add(fmt.Sprintf("hook %s %d", k, i), "POST", "/hooks/ci", []byte(`{"message":"x"}`), h)
		}
	}
	for i, b := range broken {
		add(fmt.Sprintf("hook body %d", i), "POST", "/hooks/ci", []byte(b), auth)
	}
	for i, v := range badTexts {
		add(fmt.Sprintf("hook message %d", i), "POST", "/hooks/ci", []byte(`{"message":`+jsonText(v)+`}`), auth)
	}
	return cs
}

// jsonText writes s as a JSON string, raw bytes kept (an invalid UTF-8
// byte stays invalid; a NUL becomes \u0000).
func jsonText(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Hundreds of malformed requests at every API route and at /hooks/{id}, on
// both engines: none gets a 5xx, none logs an ERROR.
func TestBadInputSuite(t *testing.T) {
	engines := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "data", "parley.db") }},
		{"postgres", func(t *testing.T) string {
			db := dbtest.RawPostgres(t) // skips without PostgreSQL
			var schema string
			if err := db.Reader().QueryRow("SELECT current_schema()").Scan(&schema); err != nil {
				t.Fatal(err)
			}
			u := os.Getenv(dbtest.EnvPostgres)
			sep := "?"
			if strings.Contains(u, "?") {
				sep = "&"
			}
			return u + sep + "search_path=" + schema
		}},
	}
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			base, errs := badInputDaemon(t, eng.url(t))
			c := &client.Client{Base: base, Token: apiToken}
			var sess struct {
				ID string `json:"id"`
			}
			if err := c.Do(context.Background(), "POST", "/v1/sessions", map[string]any{"title": "bad input"}, &sess); err != nil {
				t.Fatal(err)
			}
			cases := badInputCases(sess.ID)
			if missing := uncoveredRoutes(cases); len(missing) > 0 {
				t.Fatalf("the suite sends nothing to these API routes: %v", missing)
			}
			client := &http.Client{Timeout: 10 * time.Second}
			var fails []string
			for _, tc := range cases {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				req, err := http.NewRequestWithContext(ctx, tc.method, base+tc.path, bytes.NewReader(tc.body))
				if err != nil {
					cancel()
					t.Fatalf("%s: %v", tc.name, err)
				}
				if !strings.HasPrefix(tc.path, "/hooks/") {
					req.Header.Set("Authorization", "Bearer "+apiToken)
				}
				if len(tc.body) > 0 {
					req.Header.Set("Content-Type", "application/json")
				}
				for k, v := range tc.header {
					req.Header[k] = v
				}
				resp, err := client.Do(req)
				if err != nil {
					cancel()
					t.Fatalf("%s: %v", tc.name, err)
				}
				// An event stream that opened answers 200 and stays open.
				var body []byte
				if resp.Header.Get("Content-Type") != "text/event-stream" {
					body, _ = io.ReadAll(resp.Body)
				}
				resp.Body.Close()
				cancel()
				if resp.StatusCode >= 500 {
					fails = append(fails, fmt.Sprintf("%s: %s %q -> %d %s", tc.name, tc.method, tc.path, resp.StatusCode, body))
				}
				if lines := errs.take(); len(lines) > 0 {
					fails = append(fails, fmt.Sprintf("%s: logged %s", tc.name, strings.Join(lines, "")))
				}
			}
			t.Logf("%d requests", len(cases))
			if len(fails) > 0 {
				t.Fatalf("%d of %d bad requests failed:\n%s", len(fails), len(cases), strings.Join(fails, "\n"))
			}
		})
	}
}

// uncoveredRoutes are the API's routes no case reaches.
func uncoveredRoutes(cases []badRequestCase) []string {
	mux := http.NewServeMux()
	for _, p := range api.Patterns() {
		mux.Handle(p, http.NotFoundHandler())
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if !strings.HasPrefix(c.path, "/v1/") {
			continue
		}
		req, err := http.NewRequest(c.method, c.path, nil)
		if err != nil {
			continue
		}
		if _, pattern := mux.Handler(req); pattern != "" {
			seen[pattern] = true
		}
	}
	var missing []string
	for _, p := range api.Patterns() {
		if !seen[p] {
			missing = append(missing, p)
		}
	}
	return missing
}
