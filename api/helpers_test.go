package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

const (
	token  = "s3cret-token"
	token2 = "another-token"
)

type fakeRunner struct {
	store *sessions.SQLStore

	mu         sync.Mutex
	busy       map[sessions.ID]bool
	sent       []api.SendRequest
	aborted    []sessions.ID
	resets     []sessions.Key
	compactErr error
	runs       int
}

func (f *fakeRunner) setBusy(id sessions.ID, busy bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.busy[id] = busy
}

func (f *fakeRunner) Send(ctx context.Context, req api.SendRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.IfIdle && f.busy[req.SessionID] {
		return "", api.ErrBusy
	}
	f.sent = append(f.sent, req)
	f.runs++
	return "run-" + string(rune('0'+f.runs)), nil
}

func (f *fakeRunner) Status(id sessions.ID) api.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy[id] {
		return api.Status{State: api.StateBusy, StartedAt: time.UnixMilli(1700000000000).UTC()}
	}
	return api.Status{State: api.StateIdle}
}

func (f *fakeRunner) Abort(id sessions.ID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborted = append(f.aborted, id)
	return f.busy[id]
}

func (f *fakeRunner) Reset(ctx context.Context, key sessions.Key) (sessions.Session, error) {
	f.mu.Lock()
	f.resets = append(f.resets, key)
	f.mu.Unlock()
	return f.store.Reset(ctx, key)
}

func (f *fakeRunner) Compact(ctx context.Context, id sessions.ID) (api.CompactResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.compactErr != nil {
		return api.CompactResult{}, f.compactErr
	}
	return api.CompactResult{Compacted: true, SummaryID: "sum", Archived: 3}, nil
}

type env struct {
	srv    *httptest.Server
	store  *sessions.SQLStore
	runner *fakeRunner
	events *api.EventLog
}

func newEnv(t *testing.T, open dbtest.Opener) *env {
	t.Helper()
	st := sessions.NewStore(open(t))
	fr := &fakeRunner{store: st, busy: map[sessions.ID]bool{}}
	log := api.NewEventLog(nil)
	h := api.New(api.Options{
		Store: st, Runner: fr, Events: log, Tokens: []string{token, " " + token2 + " "},
		DefaultAgent: "main", KnownAgent: func(id string) bool { return id == "main" || id == "helper" },
		Heartbeat: time.Hour,
		AgentModels: func(id string) ([]string, string) {
			if id == "main" {
				return []string{"echo", "openai/gpt-4o"}, "low"
			}
			return nil, ""
		},
	})
	srv := newAPIServer(t, h)
	t.Cleanup(srv.Close)
	return &env{srv: srv, store: st, runner: fr, events: log}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errorCode checks the body is the error shape and returns its code.
func (r response) errorCode(t *testing.T) string {
	t.Helper()
	var raw map[string]map[string]string
	if err := json.Unmarshal(r.body, &raw); err != nil || len(raw) != 1 || raw["error"]["message"] == "" {
		t.Fatalf("error body %q is not {\"error\": {\"code\", \"message\"}}", r.body)
	}
	return raw["error"]["code"]
}

func (e *env) do(t *testing.T, method, path, body string) response {
	t.Helper()
	return e.doAuth(t, method, path, body, "Bearer "+token)
}

func (e *env) doAuth(t *testing.T, method, path, body, auth string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) createSession(t *testing.T, body string) sessions.Session {
	t.Helper()
	r := e.do(t, "POST", "/v1/sessions", body)
	if r.status != http.StatusCreated {
		t.Fatalf("create session: %d %s", r.status, r.body)
	}
	var s sessions.Session
	r.decode(t, &s)
	return s
}

// sseClient reads one SSE connection.
type sseClient struct {
	res    *http.Response
	cancel context.CancelFunc
	lines  *bufio.Reader
}

func (e *env) stream(t *testing.T, sessionID sessions.ID, query string, header http.Header) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/sessions/"+string(sessionID)+"/events"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	c := &sseClient{res: res, cancel: cancel, lines: bufio.NewReader(res.Body)}
	t.Cleanup(c.close)
	return c
}

func (c *sseClient) close() {
	c.cancel()
	c.res.Body.Close()
}

// next reads the next event, failing after a deadline.
func (c *sseClient) next(t *testing.T) api.Event {
	t.Helper()
	type result struct {
		e   api.Event
		id  string
		typ string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		for {
			line, err := c.lines.ReadString('\n')
			if err != nil {
				r.err = err
				ch <- r
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "" && r.typ != "":
				ch <- r
				return
			case strings.HasPrefix(line, "id: "):
				r.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				r.typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				r.err = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &r.e)
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("read event: %v", r.err)
		}
		if r.e.ID != r.id || r.e.Type != r.typ {
			t.Fatalf("event lines id %q type %q disagree with envelope %+v", r.id, r.typ, r.e)
		}
		return r.e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return api.Event{}
}

// serve answers one request with h in process, its response checked
// against the OpenAPI document as newAPIServer's are.
func serve(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	return serveChecked(t, h, req)
}
