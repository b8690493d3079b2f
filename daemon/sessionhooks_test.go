package daemon

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/client"
)

// Session hooks through the daemon: a session created and deleted through
// the API posts session.created and session.deleted to the hook, and
// GET /v1/sessions/{id}/hook_events shows both delivered, after the
// session is gone too.
func TestSessionHooksThroughTheAPI(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var posts atomic.Int32
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			posts.Add(1)
		}))
		defer recv.Close()
		_, url, stop := testDaemonOn(t, dbURL, "http:\n  tokens: [\""+apiToken+"\"]\n"+
			"session_hooks:\n  - url: "+recv.URL+"/events?key=k-0123456789\n    secret: "+strings.Repeat("5e2b", 16)+"\n    events: [session.created, session.deleted]\n", apiOnly)
		defer stop()
		c := &client.Client{Base: url, Token: apiToken}
		var s struct {
			ID string `json:"id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": "hooked"}, &s); err != nil {
			t.Fatal(err)
		}
		if resp, err := c.Request(ctx, "DELETE", "/v1/sessions/"+s.ID, nil); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		type event struct {
			Event, Status, URL string
		}
		var got struct {
			Events []event `json:"events"`
		}
		waitUntil(t, 20*time.Second, "both events delivered", func() bool {
			if err := c.Do(ctx, "GET", "/v1/sessions/"+s.ID+"/hook_events", nil, &got); err != nil {
				t.Fatal(err)
			}
			return len(got.Events) == 2 && got.Events[0].Status == "delivered" && got.Events[1].Status == "delivered"
		})
		if got.Events[0].Event != "session.created" || got.Events[1].Event != "session.deleted" || posts.Load() != 2 {
			t.Fatalf("events %+v after %d POSTs", got.Events, posts.Load())
		}
		if strings.Contains(got.Events[0].URL, "0123456789") {
			t.Fatalf("the hook's URL shows its query values: %s", got.Events[0].URL)
		}
		if err := c.Do(ctx, "GET", "/v1/sessions/not-a-session/hook_events", nil, &got); err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("a bad session id: %v", err)
		}
	})
}
