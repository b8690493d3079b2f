package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm/echo"
)

// withCallbacksAllowing is withCallbacks with its own http.callback_allow.
func withCallbacksAllowing(t *testing.T, allow ...string) func(*dbutil.DB, *events.Bus, *api.Options) {
	return func(db *dbutil.DB, bus *events.Bus, o *api.Options) {
		cb := api.NewCallbacks(api.CallbackOptions{DB: db, Store: o.Store, Bus: bus, Secret: callbackSecret, Allow: allow,
			Backoff: func(int) time.Duration { return time.Hour }, Poll: 5 * time.Millisecond})
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

// A webhook_url is checked wherever it is written: creating, PATCH and
// branch alike; a literal internal address is refused unless allowed.
func TestCallbackURLCheckedOnEveryWrite(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newAgentEnv(t, open, echo.New(), withCallbacksAllowing(t, "127.0.0.1"))
		sess := e.createSession(t, `{}`)
		base := "/v1/sessions/" + string(sess.ID)
		if r := e.do(t, "POST", base+"/messages", `{"content":"hello"}`); r.status != http.StatusAccepted {
			t.Fatalf("send: %d %s", r.status, r.body)
		}
		var first string
		waitFor(t, "the first message", func() bool {
			var page struct {
				Messages []struct {
					ID string `json:"id"`
				} `json:"messages"`
			}
			e.do(t, "GET", base+"/messages", "").decode(t, &page)
			if len(page.Messages) > 0 {
				first = page.Messages[0].ID
			}
			return first != ""
		})
		for _, tc := range []struct{ name, url, msg string }{
			{"file", `"file:///etc/passwd"`, "absolute http or https"},
			{"credentials", `"https://u:p@example.com/x"`, "credentials"},
			{"not a string", `42`, "must be a string"},
			{"relative", `"/replies"`, "absolute http or https"},
			{"metadata address", `"http://169.254.169.254/latest/meta-data"`, "callback_allow"},
			{"private", `"http://10.1.2.3/x"`, "callback_allow"},
			{"mapped loopback", `"http://[::ffff:127.0.0.2]/x"`, "callback_allow"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, w := range []struct{ method, path, body string }{
					{"PATCH", base, `{"metadata":{"webhook_url":` + tc.url + `}}`},
					{"POST", base + "/branch", `{"from_message_id":"` + first + `","metadata":{"webhook_url":` + tc.url + `}}`},
					{"POST", "/v1/sessions", `{"metadata":{"webhook_url":` + tc.url + `}}`},
				} {
					r := e.do(t, w.method, w.path, w.body)
					if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), tc.msg) {
						t.Fatalf("%s %s: %d %s", w.method, w.path, r.status, r.body)
					}
				}
			})
		}
		var got struct {
			Metadata map[string]any `json:"metadata"`
		}
		e.do(t, "GET", base, "").decode(t, &got)
		if _, ok := got.Metadata["webhook_url"]; ok {
			t.Fatalf("a refused write changed the session: %v", got.Metadata)
		}
		for _, body := range []string{`{"metadata":{"webhook_url":"https://example.com/x"}}`, `{"metadata":{"webhook_url":"http://127.0.0.1:9/x"}}`, `{"metadata":{"webhook_url":null}}`} {
			if r := e.do(t, "PATCH", base, body); r.status != http.StatusOK {
				t.Fatalf("PATCH %s: %d %s", body, r.status, r.body)
			}
		}
		plain := newEnv(t, open)
		ps := plain.createSession(t, `{}`)
		if r := plain.do(t, "PATCH", "/v1/sessions/"+string(ps.ID), `{"metadata":{"webhook_url":"https://example.com/x"}}`); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "not enabled") {
			t.Fatalf("PATCH without callbacks: %d %s", r.status, r.body)
		}
	})
}

// attempts waits for a session's first callback attempt and returns it.
func firstAttempt(t *testing.T, e *agentEnv, sid string) (api.Callback, api.CallbackAttempt) {
	t.Helper()
	var list api.CallbacksResponse
	waitFor(t, "a callback attempt", func() bool {
		list = api.CallbacksResponse{}
		e.do(t, "GET", "/v1/sessions/"+sid+"/callbacks", "").decode(t, &list)
		// A delivered attempt is seen once its status says so (the list
		// reads the callback and its attempts apart).
		return len(list.Callbacks) == 1 && len(list.Callbacks[0].History) > 0 &&
			(list.Callbacks[0].Status != api.CallbackPending || list.Callbacks[0].History[0].Error != "")
	})
	return list.Callbacks[0], list.Callbacks[0].History[0]
}

// A host name that resolves to an internal address (as a rebound name
// would) is refused when the connection is made, unless allowed by
// address or by name.
func TestCallbacksReachInternalAddressesOnlyWhenAllowed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		allow     []string
		delivered bool
	}{
		{"nothing allowed", nil, false},
		{"another network allowed", []string{"10.0.0.0/8"}, false},
		{"address allowed", []string{"127.0.0.0/8", "::1"}, true},
		{"host allowed", []string{"localhost"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &receiver{}
			hook := newHookServer(t, rc)
			t.Cleanup(hook.Close)
			target := strings.Replace(hook.URL, "127.0.0.1", "localhost", 1) + "/replies"
			e := newAgentEnv(t, dbtest.SQLite, echo.New(), withCallbacksAllowing(t, tc.allow...))
			sess := e.createSession(t, `{"webhook_url":"`+target+`"}`)
			if r := e.do(t, "POST", "/v1/sessions/"+string(sess.ID)+"/messages", `{"content":"ping"}`); r.status != http.StatusAccepted {
				t.Fatalf("send: %d %s", r.status, r.body)
			}
			cb, a := firstAttempt(t, e, string(sess.ID))
			if tc.delivered {
				if cb.Status != api.CallbackDelivered || len(rc.requests()) != 1 {
					t.Fatalf("callback %+v, %d requests", cb, len(rc.requests()))
				}
				return
			}
			if a.StatusCode != 0 || !strings.Contains(a.Error, "callback_allow") || len(rc.requests()) != 0 {
				t.Fatalf("attempt %+v, %d requests reached the receiver", a, len(rc.requests()))
			}
		})
	}
}

// A receiver's redirect is its answer: it is not followed.
func TestCallbackRedirectIsNotFollowed(t *testing.T) {
	final := &receiver{}
	hidden := httptest.NewServer(final)
	t.Cleanup(hidden.Close)
	hop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, hidden.URL+"/inside", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(hop.Close)
	e := newAgentEnv(t, dbtest.SQLite, echo.New(), withCallbacksAllowing(t, "127.0.0.1"))
	sess := e.createSession(t, `{"webhook_url":"`+hop.URL+`/replies"}`)
	if r := e.do(t, "POST", "/v1/sessions/"+string(sess.ID)+"/messages", `{"content":"ping"}`); r.status != http.StatusAccepted {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	_, a := firstAttempt(t, e, string(sess.ID))
	if a.StatusCode != http.StatusTemporaryRedirect || !strings.Contains(a.Error, "redirects are not followed") || len(final.requests()) != 0 {
		t.Fatalf("attempt %+v, %d requests reached the redirect's target", a, len(final.requests()))
	}
}
