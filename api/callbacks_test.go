package api_test

import (
	"context"
	"encoding/json"
	"github.com/parleyd/parley/signing"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm/echo"
)

const callbackSecret = "callback-secret"

type received struct {
	ts, sig string
	body    []byte
}

// receiver answers the statuses given, in turn (200 once they run out),
// and keeps every request.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	got      []received
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, received{ts: r.Header.Get("X-Parley-Timestamp"), sig: r.Header.Get("X-Parley-Signature"), body: body})
	status := http.StatusOK
	if len(rc.statuses) > 0 {
		status, rc.statuses = rc.statuses[0], rc.statuses[1:]
	}
	rc.mu.Unlock()
	w.WriteHeader(status)
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func withCallbacks(t *testing.T) func(*dbutil.DB, *events.Bus, *api.Options) {
	return func(db *dbutil.DB, bus *events.Bus, o *api.Options) {
		cb := api.NewCallbacks(api.CallbackOptions{DB: db, Store: o.Store, Bus: bus, Secret: callbackSecret, Allow: []string{"127.0.0.1"},
			Backoff: func(int) time.Duration { return 0 }, Poll: 5 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cb.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
		o.Callbacks = cb
	}
}

// A finished reply is POSTed, signed, to the session's webhook_url; a 500
// is retried, and the list shows both attempts.
func TestReplyCallbacks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		rc := &receiver{statuses: []int{http.StatusInternalServerError}}
		hook := newHookServer(t, rc)
		t.Cleanup(hook.Close)
		e := newAgentEnv(t, open, echo.New(), withCallbacks(t))

		sess := e.createSession(t, `{"title":"cb","webhook_url":"`+hook.URL+`/replies"}`)
		if api.WebhookURL(sess.Metadata) != hook.URL+"/replies" {
			t.Fatalf("metadata %s", sess.Metadata)
		}
		// A session without a webhook_url gets no callbacks.
		quiet := e.createSession(t, `{"title":"quiet"}`)
		for _, id := range []string{string(quiet.ID), string(sess.ID)} {
			if r := e.do(t, "POST", "/v1/sessions/"+id+"/messages", `{"content":"ping back"}`); r.status != http.StatusAccepted {
				t.Fatalf("send: %d %s", r.status, r.body)
			}
		}

		var list api.CallbacksResponse
		waitFor(t, "a delivered callback", func() bool {
			r := e.do(t, "GET", "/v1/sessions/"+string(sess.ID)+"/callbacks", "")
			list = api.CallbacksResponse{}
			r.decode(t, &list)
			return len(list.Callbacks) == 1 && list.Callbacks[0].Status == api.CallbackDelivered
		})
		cb := list.Callbacks[0]
		if cb.Attempts != 2 || len(cb.History) != 2 || cb.History[0].StatusCode != 500 || cb.History[0].Error == "" ||
			cb.History[1].StatusCode != 200 || cb.History[1].Error != "" || cb.URL != hook.URL+"/replies" {
			t.Fatalf("callback %+v", cb)
		}

		got := rc.requests()
		if len(got) != 2 {
			t.Fatalf("%d requests", len(got))
		}
		for _, g := range got {
			if want := signature(g.ts, g.body); g.sig != want {
				t.Fatalf("signature %q, want %q", g.sig, want)
			}
			if forged := signature(g.ts, append([]byte(nil), append(g.body, ' ')...)); forged == g.sig {
				t.Fatal("the signature does not cover the body")
			}
		}
		var p api.CallbackPayload
		if err := json.Unmarshal(got[1].body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Type != "reply" || p.SessionID != sess.ID || p.MessageID != cb.MessageID || !strings.Contains(p.Content, "ping back") || p.Aborted {
			t.Fatalf("payload %+v", p)
		}

		r := e.do(t, "GET", "/v1/sessions/"+string(quiet.ID)+"/callbacks", "")
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"callbacks":[]}` {
			t.Fatalf("quiet session: %d %s", r.status, r.body)
		}
		if r := e.do(t, "GET", "/v1/sessions/nope/callbacks", ""); r.status != http.StatusNotFound {
			t.Fatalf("unknown session: %d %s", r.status, r.body)
		}
	})
}

func TestCallbackURLValidation(t *testing.T) {
	e := newAgentEnv(t, dbtest.SQLite, echo.New(), withCallbacks(t))
	for _, tc := range []struct{ name, body, msg string }{
		{"relative", `{"webhook_url":"/replies"}`, "absolute http or https"},
		{"ftp", `{"webhook_url":"ftp://example.com/x"}`, "absolute http or https"},
		{"credentials", `{"webhook_url":"https://u:p@example.com/x"}`, "credentials"},
		{"not a string in metadata", `{"metadata":{"webhook_url":42}}`, "must be a string"},
		{"bad in metadata", `{"metadata":{"webhook_url":"nope"}}`, "absolute http or https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "POST", "/v1/sessions", tc.body)
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), tc.msg) {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	t.Run("not enabled", func(t *testing.T) {
		plain := newEnv(t, dbtest.SQLite)
		r := plain.do(t, "POST", "/v1/sessions", `{"webhook_url":"https://example.com/x"}`)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "not enabled") {
			t.Fatalf("%d %s", r.status, r.body)
		}
		s := plain.createSession(t, `{}`)
		if r := plain.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/callbacks", ""); r.status != http.StatusServiceUnavailable {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
	})
}

func signature(ts string, body []byte) string {
	sec, _ := strconv.ParseInt(ts, 10, 64)
	_, sig := signing.Sign(callbackSecret, time.Unix(sec, 0), body)
	return sig
}

// waitFor polls cond until it holds, failing after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
		<-tick.C
	}
}
