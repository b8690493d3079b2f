package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/parleyd/parley/api/openapitest"
	"github.com/parleyd/parley/signing"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/internal/syncbuf"
)

const secret = "0123456789abcdef0123456789abcdef-secret"

// sink stands in for the gateway; with answer set, it replies at once
// through Send, as the outbox would.
type sink struct {
	mu     sync.Mutex
	got    []adapters.Inbound
	srv    *Server
	answer string
	fail   error
}

func (k *sink) Deliver(ctx context.Context, in adapters.Inbound) error {
	k.mu.Lock()
	if k.fail != nil {
		err := k.fail
		k.fail = nil
		k.mu.Unlock()
		return err
	}
	k.got = append(k.got, in)
	answer := k.answer
	k.mu.Unlock()
	if answer != "" {
		go func() {
			_, _ = k.srv.Send(context.Background(), adapters.Outbound{Adapter: AdapterID, ChatID: in.ChatID, Text: answer + ": " + in.Text})
		}()
	}
	return nil
}

func (k *sink) delivered() []adapters.Inbound {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]adapters.Inbound(nil), k.got...)
}

type notice struct{ target, text string }

func setup(t testing.TB, hooks string, answer string) (*Server, *sink, *httptest.Server, func() []notice) {
	t.Helper()
	return setupOn(t, dbtest.SQLite(t), hooks, answer)
}

// setupOn is setup on the database db.
func setupOn(t testing.TB, db *dbutil.DB, hooks string, answer string) (*Server, *sink, *httptest.Server, func() []notice) {
	t.Helper()
	c, err := config.Parse([]byte(hooks), "parley.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []notice
	srv := New(Options{Hooks: c.Hooks, DB: db, Notify: func(_ context.Context, target, text, _ string, _ ...adapters.OutFile) error {
		mu.Lock()
		notices = append(notices, notice{target, text})
		mu.Unlock()
		return nil
	}})
	k := &sink{srv: srv, answer: answer}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = srv.Start(ctx, k) }()
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{id}", srv)
	hs := openapitest.Server(t, mux)
	t.Cleanup(func() { hs.Close(); cancel() })
	return srv, k, hs, func() []notice {
		mu.Lock()
		defer mu.Unlock()
		return append([]notice(nil), notices...)
	}
}

const hmacHook = "adapters:\n  - id: tg-main\n    type: telegram\nhooks:\n  - id: ci\n    auth: hmac\n    secret: " + secret + "\n    prompt: \"CI failed on {{.repo}}\"\n    notify: [\"tg-main:42\"]\n"

func post(t testing.TB, url string, body []byte, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func signed(body []byte, at time.Time) map[string]string {
	ts, sig := signing.Sign(secret, at, body)
	return map[string]string{"X-Parley-Timestamp": ts, "X-Parley-Signature": sig}
}

func errorCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func TestHMACRequests(t *testing.T) {
	_, k, hs, _ := setup(t, hmacHook, "")
	body := []byte(`{"repo":"parley"}`)
	url := hs.URL + "/hooks/ci"
	bad := signed(body, time.Now())
	bad["X-Parley-Signature"] = "sha256=" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name   string
		body   []byte
		hdr    map[string]string
		status int
		code   string
	}{
		{"valid", body, signed(body, time.Now()), 202, ""},
		{"wrong signature", body, bad, 401, "unauthorized"},
		{"signed for another body", []byte(`{"repo":"evil"}`), signed(body, time.Now()), 401, "unauthorized"},
		{"stale", body, signed(body, time.Now().Add(-6*time.Minute)), 401, "stale"},
		{"from the future", body, signed(body, time.Now().Add(6*time.Minute)), 401, "stale"},
		{"missing headers", body, nil, 401, "unauthorized"},
		{"not JSON", []byte(`{"repo":`), signed([]byte(`{"repo":`), time.Now()), 400, "bad_json"},
		{"1 MiB + 1", bytes.Repeat([]byte(" "), MaxBody+1), nil, 413, "body_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(k.delivered())
			status, out := post(t, url, tc.body, tc.hdr)
			if status != tc.status || errorCode(out) != tc.code {
				t.Fatalf("%d %v, want %d %q", status, out, tc.status, tc.code)
			}
			started := len(k.delivered()) - before
			if (status == 202) != (started == 1) {
				t.Fatalf("%d sessions started", started)
			}
		})
	}
	got := k.delivered()[0]
	if got.Text != "CI failed on parley" || got.Adapter != AdapterID || !got.Group || !strings.HasPrefix(got.ChatID, "ci:") {
		t.Fatalf("delivered %+v", got)
	}
	if status, _ := post(t, hs.URL+"/hooks/nope", body, signed(body, time.Now())); status != 404 {
		t.Fatalf("unknown hook: %d", status)
	}
}

func TestGitHubAndTokenAuth(t *testing.T) {
	hooks := "hooks:\n  - id: gh\n    auth: github\n    secret: " + secret + "\n    prompt: \"PR {{.pull_request.title}} by {{.sender.login}}\"\n" +
		"  - id: tok\n    auth: token\n    secret: " + secret + "\n    prompt: \"hi\"\n"
	_, k, hs, _ := setup(t, hooks, "")
	body := []byte(`{"pull_request":{"title":"Fix it"},"sender":{"login":"ann"}}`)
	_, sig := signing.Sign(secret, time.Now(), nil) // a wrong kind of signature: it covers "ts."
	if status, _ := post(t, hs.URL+"/hooks/gh", body, map[string]string{"X-Hub-Signature-256": sig}); status != 401 {
		t.Fatalf("bad github signature: %d", status)
	}
	if status, out := post(t, hs.URL+"/hooks/gh", body, map[string]string{"X-Hub-Signature-256": githubSig(body)}); status != 202 {
		t.Fatalf("github: %d %v", status, out)
	}
	if got := k.delivered(); len(got) != 1 || got[0].Text != "PR Fix it by ann" {
		t.Fatalf("delivered %+v", got)
	}
	if status, _ := post(t, hs.URL+"/hooks/tok", []byte(`{}`), map[string]string{"Authorization": "Bearer wrong"}); status != 401 {
		t.Fatalf("bad token: %d", status)
	}
	if status, _ := post(t, hs.URL+"/hooks/tok", []byte(`{}`), map[string]string{"Authorization": "Bearer " + secret}); status != 202 {
		t.Fatalf("token: %d", status)
	}
}

// githubSig is how GitHub signs a body: sha256=hex(HMAC(secret, body)).
func githubSig(body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// A repeated delivery id gets the first response, and starts nothing.
func TestDuplicateDelivery(t *testing.T) {
	_, k, hs, _ := setup(t, hmacHook, "")
	deliverTwice(t, hs, k, "X-GitHub-Delivery", "abc-123")
}

// deliverTwice sends one delivery twice under the delivery key header: both
// are accepted, the repeat gets the first's delivery id, and one delivery
// starts.
func deliverTwice(t *testing.T, hs *httptest.Server, k *sink, header, key string) {
	t.Helper()
	body := []byte(`{"repo":"parley"}`)
	hdr := signed(body, time.Now())
	hdr[header] = key
	s1, first := post(t, hs.URL+"/hooks/ci", body, hdr)
	s2, second := post(t, hs.URL+"/hooks/ci", body, hdr)
	if s1 != 202 || s2 != 202 || first["delivery_id"] != second["delivery_id"] || first["delivery_id"] == nil {
		t.Fatalf("first %d %v, repeat %d %v", s1, first, s2, second)
	}
	if n := len(k.delivered()); n != 1 {
		t.Fatalf("%d deliveries started", n)
	}
}

// A delivery key longer than parley keeps is cut on a character boundary:
// cut mid-character, PostgreSQL refused to store it and the delivery failed.
func TestLongDeliveryKeyIsCutWhole(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		_, k, hs, _ := setupOn(t, open(t), hmacHook, "")
		// é spans bytes 199 and 200.
		deliverTwice(t, hs, k, "Idempotency-Key", strings.Repeat("k", 199)+"é and more")
	})
}

// A delivery the gateway couldn't take is answered 503, and the same
// delivery id sent again is a fresh try.
func TestFailedDeliveryCanBeRetried(t *testing.T) {
	_, k, hs, _ := setup(t, hmacHook, "")
	k.fail = errors.New("database is locked")
	body := []byte(`{"repo":"parley"}`)
	hdr := signed(body, time.Now())
	hdr["Idempotency-Key"] = "retry-me"
	if status, out := post(t, hs.URL+"/hooks/ci", body, hdr); status != 503 || errorCode(out) != "unavailable" {
		t.Fatalf("failing gateway: %d %v", status, out)
	}
	if status, _ := post(t, hs.URL+"/hooks/ci", body, hdr); status != 202 {
		t.Fatalf("retry: %d", status)
	}
}

func TestSyncModeReturnsTheReply(t *testing.T) {
	hooks := strings.Replace(hmacHook, "    notify:", "    mode: sync\n    timeout: 5s\n    notify:", 1)
	srv, _, hs, notices := setup(t, hooks, "echo")
	body := []byte(`{"repo":"parley"}`)
	status, out := post(t, hs.URL+"/hooks/ci", body, signed(body, time.Now()))
	if status != 200 || out["reply"] != "echo: CI failed on parley" || out["status"] != "answered" {
		t.Fatalf("sync: %d %v", status, out)
	}
	if got := notices(); len(got) != 1 || got[0].target != "tg-main:42" || got[0].text != "echo: CI failed on parley" {
		t.Fatalf("notices %+v", got)
	}
	ds, err := Deliveries(context.Background(), srv.opts.DB, "ci", 10)
	if err != nil || len(ds) != 1 || ds[0].Status != "answered" || ds[0].Reply != "echo: CI failed on parley" || ds[0].HTTPStatus != 200 {
		t.Fatalf("recorded %+v %v", ds, err)
	}
}

func TestSyncModeTimesOut(t *testing.T) {
	hooks := strings.Replace(hmacHook, "    notify:", "    mode: sync\n    timeout: 50ms\n    notify:", 1)
	_, _, hs, _ := setup(t, hooks, "")
	body := []byte(`{"repo":"parley"}`)
	status, out := post(t, hs.URL+"/hooks/ci", body, signed(body, time.Now()))
	if status != 202 || out["status"] != "running" {
		t.Fatalf("timed out sync: %d %v", status, out)
	}
}

// The handler never panics on any input, and never starts a session for a
// request whose signature is wrong.
func FuzzHandler(f *testing.F) {
	f.Add([]byte(`{"repo":"x"}`), "sha256=00", "1700000000", "ci")
	f.Add([]byte(`not json`), "", "", "ci")
	f.Add([]byte(`{}`), "sha256=zz", "abc", "nope")
	_, k, _, _ := setup(f, hmacHook, "")
	srv := k.srv
	f.Fuzz(func(t *testing.T, body []byte, sig, ts, hook string) {
		req := httptest.NewRequest("POST", "/hooks/x", bytes.NewReader(body))
		req.SetPathValue("id", hook)
		req.Header.Set("X-Parley-Signature", sig)
		req.Header.Set("X-Parley-Timestamp", ts)
		before := len(k.delivered())
		rr := httptest.NewRecorder()
		srv.ServeHTTP(rr, req)
		if len(k.delivered()) != before {
			t.Fatalf("a request signed %q started a session (status %d)", sig, rr.Code)
		}
		var out map[string]any
		if err := json.Unmarshal(rr.Body.Bytes(), &out); err != nil {
			t.Fatalf("the response is not JSON: %q", rr.Body.String())
		}
	})
}

// A note that fails to queue fails Send, so the outbox sends the reply
// again; the retry notifies under the same key, and a target that already
// has the note is not given it twice by the notifier.
func TestNotifyFailureIsRetried(t *testing.T) {
	c, err := config.Parse([]byte(hmacHook), "parley.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	fail := true
	srv := New(Options{Hooks: c.Hooks, DB: dbtest.SQLite(t), Notify: func(_ context.Context, target, _, key string, _ ...adapters.OutFile) error {
		keys = append(keys, key)
		if fail {
			fail = false
			return errors.New("database is locked")
		}
		return nil
	}})
	out := adapters.Outbound{Adapter: AdapterID, ChatID: "ci:1700000000000-abcdef", Text: "red build", IdempotencyKey: "0193-inbound:0"}
	if _, err := srv.Send(context.Background(), out); err == nil || !strings.Contains(err.Error(), "tg-main:42") {
		t.Fatalf("first send: %v, want the failed notify's error", err)
	}
	if _, err := srv.Send(context.Background(), out); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if len(keys) != 2 || keys[0] != keys[1] || !strings.Contains(keys[0], "0193-inbound:0") {
		t.Fatalf("notify keys %q: want one key, the reply's, twice", keys)
	}
	// Another reply chunk, or another target, is another note.
	if k := NoteKey(adapters.Outbound{ChatID: out.ChatID, IdempotencyKey: "0193-inbound:1"}, "tg-main:42"); k == keys[0] {
		t.Fatalf("chunk 1 shares chunk 0's key %q", k)
	}
	if k := NoteKey(out, "tg-main:43"); k == keys[0] {
		t.Fatalf("another target shares the key %q", k)
	}
}

// A refused request is logged at warn, without its body, and counted by
// hook and reason; an accepted one is neither.
func TestRefusedRequestsAreLoggedAndCounted(t *testing.T) {
	c, err := config.Parse([]byte(hmacHook), "parley.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	var mu sync.Mutex
	var refused []string
	srv := New(Options{Hooks: c.Hooks, DB: dbtest.SQLite(t), Log: slog.New(slog.NewJSONHandler(&logs, nil)),
		OnRefused: func(hook, reason string) {
			mu.Lock()
			refused = append(refused, hook+"/"+reason)
			mu.Unlock()
		}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Start(ctx, &sink{srv: srv}) }()
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{id}", srv)
	hs := openapitest.Server(t, mux)
	defer hs.Close()

	body := []byte(`{"repo":"BODY-MARKER"}`)
	bad := signed(body, time.Now())
	bad["X-Parley-Signature"] = "sha256=" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name, path string
		body       []byte
		hdr        map[string]string
		want       string
	}{
		{"bad signature", "/hooks/ci", body, bad, "ci/unauthorized"},
		{"stale", "/hooks/ci", body, signed(body, time.Now().Add(-10*time.Minute)), "ci/stale"},
		{"unknown hook", "/hooks/BODY-MARKER-hook", body, signed(body, time.Now()), "/not_found"},
		{"too large", "/hooks/ci", bytes.Repeat([]byte("BODY-MARKER "), MaxBody/10), nil, "ci/body_too_large"},
		{"accepted", "/hooks/ci", body, signed(body, time.Now()), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			before := len(refused)
			mu.Unlock()
			post(t, hs.URL+tc.path, tc.body, tc.hdr)
			mu.Lock()
			got := append([]string(nil), refused[before:]...)
			mu.Unlock()
			if tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
				t.Fatalf("counted %q, want %q", got, tc.want)
			}
		})
	}
	out := logs.String()
	if n := strings.Count(out, `"msg":"webhook request refused"`); n != 4 || !strings.Contains(out, `"level":"WARN"`) {
		t.Fatalf("%d refusals logged at warn, want 4:\n%s", n, out)
	}
	for _, reason := range []string{"unauthorized", "stale", "not_found", "body_too_large"} {
		if !strings.Contains(out, `"reason":"`+reason+`"`) {
			t.Fatalf("no refusal logged with reason %s:\n%s", reason, out)
		}
	}
	if strings.Contains(out, "BODY-MARKER") {
		t.Fatalf("a request's body or path reached the log:\n%s", out)
	}
}

// Each delivery records the HTTP status its sender got (the dashboard
// showed "HTTP 0" for every async one): 202 for an async acceptance, 503
// for one the gateway couldn't take; a repeat still gets the first's
// answer, on both engines.
func TestDeliveriesRecordTheirHTTPStatus(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		srv, k, hs, _ := setupOn(t, open(t), hmacHook, "")
		body := []byte(`{"repo":"parley"}`)
		hdr := signed(body, time.Now())
		hdr["Idempotency-Key"] = "first"
		status, first := post(t, hs.URL+"/hooks/ci", body, hdr)
		if status != 202 {
			t.Fatalf("async: %d %v", status, first)
		}
		if status, again := post(t, hs.URL+"/hooks/ci", body, hdr); status != 202 || again["delivery_id"] != first["delivery_id"] || again["status"] != "accepted" {
			t.Fatalf("repeat: %d %v", status, again)
		}
		k.fail = errors.New("database is locked")
		other := []byte(`{"repo":"another"}`) // a new signature, not a replay
		if status, out := post(t, hs.URL+"/hooks/ci", other, signed(other, time.Now())); status != 503 {
			t.Fatalf("failing gateway: %d %v", status, out)
		}
		ds, err := Deliveries(context.Background(), srv.opts.DB, "ci", 10)
		if err != nil || len(ds) != 2 {
			t.Fatalf("deliveries %+v %v", ds, err)
		}
		got := map[string]int{}
		for _, d := range ds {
			got[d.Status] = d.HTTPStatus
		}
		if got["accepted"] != 202 || got["failed"] != 503 {
			t.Fatalf("recorded HTTP statuses %v, want accepted 202 and failed 503", got)
		}
	})
}
