package telegram

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parleyd/parley/adapters"
	tt "github.com/parleyd/parley/adapters/telegram/telegramtest"
)

const hookSecret = "hook-Secret_0123456789_0123456789"

// webhookSetup mounts a webhook-mode adapter on a server of its own, as
// the daemon mounts it on parley's, and points its webhook there.
func webhookSetup(t *testing.T) (*tt.Server, *harness, *httptest.Server) {
	t.Helper()
	srv := tt.NewServer()
	t.Cleanup(srv.Close)
	mux := http.NewServeMux()
	parley := httptest.NewServer(mux)
	t.Cleanup(parley.Close)
	// A local Bot API server may post to http, so api_endpoint (the fake)
	// allows the test server's URL.
	h := newHarness(t, srv, testToken, "mode: webhook\nwebhook:\n  url: "+parley.URL+"/tg/hook\n  secret_token: "+hookSecret+"\n")
	pattern, handler := h.a.Webhook()
	if pattern != "POST /tg/hook" || handler == nil {
		t.Fatalf("Webhook() = %q, %v", pattern, handler)
	}
	mux.Handle(pattern, handler)
	return srv, h, parley
}

func TestWebhook(t *testing.T) {
	srv, h, parley := webhookSetup(t)
	ctx := testContext(t)
	target := parley.URL + "/tg/hook"

	// Before Start: 503, so Telegram tries again later.
	rec := httptest.NewRecorder()
	_, handler := h.a.Webhook()
	handler.ServeHTTP(rec, tt.WebhookRequest(target, hookSecret, textUpdate(42, 1, "early")))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("before Start: %d", rec.Code)
	}

	s := newSink()
	fails := 1
	s.fail = func(n int, in adapters.Inbound) error {
		if in.Text == "flaky" && fails > 0 {
			fails--
			return errors.New("store unavailable")
		}
		return nil
	}
	h.start(s)
	if err := srv.WaitFor(ctx, func() bool { return srv.Webhook().URL != "" }); err != nil {
		t.Fatal(err)
	}
	wh := srv.Webhook()
	if wh.URL != target || wh.SecretToken != hookSecret || wh.AllowedUpdates != `["message","edited_message","callback_query"]` {
		t.Fatalf("setWebhook got %+v", wh)
	}
	if err := h.waitHealth(ctx, func(ok bool, detail string) bool {
		return ok && detail == "webhook for @parley_test_bot on /tg/hook"
	}); err != nil {
		t.Fatal(err)
	}
	if srv.Calls("getUpdates") != 0 || srv.Calls("deleteWebhook") != 0 {
		t.Fatal("webhook mode polled or dropped the webhook")
	}

	do := func(req *http.Request) int {
		t.Helper()
		resp, err := parley.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	post := func(secret string, u tt.Update) int {
		req := tt.WebhookRequest(target, secret, u)
		req.RequestURI = ""
		return do(req.WithContext(ctx))
	}

	// Wrong or missing secret: 401, nothing delivered.
	if code := post("wrong-secret", textUpdate(42, 1, "forged")); code != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", code)
	}
	if code := post("", textUpdate(42, 1, "forged")); code != http.StatusUnauthorized {
		t.Fatalf("no secret: %d", code)
	}
	if code := post(hookSecret[:len(hookSecret)-1], textUpdate(42, 1, "forged")); code != http.StatusUnauthorized {
		t.Fatalf("prefix of the secret: %d", code)
	}
	if len(s.taken()) != 0 {
		t.Fatalf("forged updates delivered: %+v", s.taken())
	}

	// Right secret, as Telegram posts it: 200 once delivered.
	if code, err := srv.PostWebhook(ctx, textUpdate(42, 1, "hello")); err != nil || code != http.StatusOK {
		t.Fatalf("post: %d %v", code, err)
	}
	got := s.taken()
	if len(got) != 1 || got[0].Text != "hello" || got[0].ChatID != "42" || got[0].MessageID != "1" {
		t.Fatalf("delivered %+v", got)
	}

	// The sink fails: 503 so Telegram sends it again; then 200.
	if code, _ := srv.PostWebhook(ctx, textUpdate(42, 2, "flaky")); code != http.StatusServiceUnavailable {
		t.Fatalf("failed delivery answered %d", code)
	}
	if code, _ := srv.PostWebhook(ctx, textUpdate(42, 2, "flaky")); code != http.StatusOK {
		t.Fatalf("retry answered %d", code)
	}
	if got := s.taken(); len(got) != 2 || got[1].MessageID != "2" {
		t.Fatalf("delivered %+v", got)
	}

	// An edit is delivered as a message of its own, naming the one it edits.
	edit := textUpdate(42, 1, "edit").Message
	edit.EditDate = 1700000099
	if code, _ := srv.PostWebhook(ctx, tt.Update{UpdateID: 9, EditedMessage: edit}); code != http.StatusOK {
		t.Fatalf("edited message answered %d", code)
	}
	if got := s.taken(); len(got) != 3 || got[2].Edits != "1" || got[2].MessageID != "1:edit:1700000099" || got[2].Text != "edit" {
		t.Fatalf("delivered %+v", got)
	}
	// Ignored kinds are answered 200 and not delivered.
	if code, _ := srv.PostWebhook(ctx, tt.Update{UpdateID: 10, ChannelPost: &tt.Message{MessageID: 1, Chat: tt.Chat{ID: -1009, Type: "channel"}, Text: "news"}}); code != http.StatusOK {
		t.Fatalf("channel post answered %d", code)
	}

	// Bad requests.
	big := tt.WebhookRequest(target, hookSecret, textUpdate(42, 3, strings.Repeat("x", 2<<20)))
	big.RequestURI = ""
	if code := do(big.WithContext(ctx)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB body: %d", code)
	}
	junk, _ := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader([]byte("{not json")))
	junk.Header.Set(SecretHeader, hookSecret)
	if code := do(junk); code != http.StatusBadRequest {
		t.Fatalf("junk body: %d", code)
	}
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	get.Header.Set(SecretHeader, hookSecret)
	if code := do(get); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", code)
	}
	if got := s.taken(); len(got) != 3 {
		t.Fatalf("delivered %+v", got)
	}
	if strings.Contains(h.log.String(), hookSecret) || strings.Contains(h.log.String(), "AAHfake") {
		t.Fatalf("a secret is in the logs:\n%s", h.log)
	}
}

func TestWebhookRegistrationFailure(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	srv.Fail("setWebhook", tt.Failure{Code: 400, Description: "Bad Request: bad webhook: Failed to resolve host: Name or service not known"})
	h := newHarness(t, srv, testToken, "mode: webhook\nwebhook: {url: 'https://nowhere.invalid/tg', secret_token: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}")
	err := h.a.Start(testContext(t), newSink())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Method != "setWebhook" || !strings.Contains(err.Error(), "Failed to resolve host") {
		t.Fatalf("Start = %v", err)
	}
}

// Guessing the secret token is slowed: an address that sends too many
// wrong ones is refused (429) for a while, even with the right one, and
// every refusal is counted; another address is unaffected.
func TestWebhookThrottlesSecretGuesses(t *testing.T) {
	srv, h, parley := webhookSetup(t)
	var refused []string
	h.a.refused = func(reason string) { refused = append(refused, reason) }
	h.start(newSink())
	ctx := testContext(t)
	if err := srv.WaitFor(ctx, func() bool { return srv.Webhook().URL != "" }); err != nil {
		t.Fatal(err)
	}
	_, handler := h.a.Webhook()
	target := parley.URL + "/tg/hook"
	post := func(addr, secret string, id int) int {
		req := tt.WebhookRequest(target, secret, textUpdate(42, id, "hi"))
		req.RemoteAddr = addr + ":5555"
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range webhookGuesses {
		if code := post("203.0.113.9", "guess", 100+i); code != http.StatusUnauthorized {
			t.Fatalf("wrong secret %d: %d, want 401", i+1, code)
		}
	}
	if code := post("203.0.113.9", "guess", 199); code != http.StatusTooManyRequests {
		t.Fatalf("one more wrong secret from a guessing address: %d, want 429", code)
	}
	// Behind a reverse proxy Telegram shares the guesser's address: its
	// updates still pass.
	if code := post("203.0.113.9", hookSecret, 200); code != http.StatusOK {
		t.Fatalf("the right secret from a guessing address: %d, want 200", code)
	}
	if code := post("198.51.100.7", hookSecret, 201); code != http.StatusOK {
		t.Fatalf("the right secret from another address: %d, want 200", code)
	}
	if len(refused) != webhookGuesses+1 || refused[0] != "secret_token" || refused[len(refused)-1] != "throttled" {
		t.Fatalf("refusals counted: %v", refused)
	}
}
