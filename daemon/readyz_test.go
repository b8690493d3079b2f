package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/metrics"
)

type healthyRecorder struct {
	*adapterstest.Recorder
	ok     bool
	detail string
}

func (h healthyRecorder) Health() (bool, string) { return h.ok, h.detail }

func TestReadyzShowsChannels(t *testing.T) {
	db := dbtest.SQLite(t)
	for _, tc := range []struct {
		name, status string
		channels     map[adapters.ID]adapters.Adapter
		want         map[string]string
	}{
		{"no channel reports", "ready", map[adapters.ID]adapters.Adapter{"tg": adapterstest.New()}, nil},
		{"linked", "ready", map[adapters.ID]adapters.Adapter{"wa": healthyRecorder{adapterstest.New(), true, "connected"}}, map[string]string{"wa": "connected"}},
		{"logged out", "degraded", map[adapters.ID]adapters.Adapter{
			"wa": healthyRecorder{adapterstest.New(), false, "logged out: link again with parley whatsapp link --adapter wa"},
			"tg": adapterstest.New(),
		}, map[string]string{"wa": "logged out: link again with parley whatsapp link --adapter wa"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(context.Background(), "GET", "/readyz", nil)
			httpserve.Handler(db, tc.channels, nil).ServeHTTP(rr, req)
			if rr.Code != http.StatusOK {
				t.Fatalf("status %d", rr.Code)
			}
			var body struct {
				Status   string            `json:"status"`
				Channels map[string]string `json:"channels"`
			}
			if err := json.Unmarshal(rr.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.Status != tc.status || len(body.Channels) != len(tc.want) {
				t.Fatalf("body %s", rr.Body.String())
			}
			for k, v := range tc.want {
				if body.Channels[k] != v {
					t.Fatalf("channel %s: %q, want %q", k, body.Channels[k], v)
				}
			}
		})
	}
}

type flippingHealth struct {
	*adapterstest.Recorder
	mu sync.Mutex
	ok bool
}

func (f *flippingHealth) Health() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ok, ""
}

func (f *flippingHealth) set(ok bool) {
	f.mu.Lock()
	f.ok = ok
	f.mu.Unlock()
}

// A channel that goes down and comes back counts an error and a reconnect.
func TestChannelHealthMetrics(t *testing.T) {
	ch := &flippingHealth{Recorder: adapterstest.New(), ok: true}
	d := &Daemon{metrics: metrics.New(), adapters: map[adapters.ID]adapters.Adapter{"wa": ch}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.metrics.WatchChannels(ctx, time.Millisecond, d.adapters, d.runElsewhere); close(done) }()
	scrape := func() string {
		rr := httptest.NewRecorder()
		d.metrics.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
		return rr.Body.String()
	}
	wait := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(scrape(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in\n%s", want, scrape())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	time.Sleep(5 * time.Millisecond)
	ch.set(false)
	wait(`parley_adapter_errors_total{adapter="wa"} 1`)
	ch.set(true)
	wait(`parley_adapter_reconnects_total{adapter="wa"} 1`)
	cancel()
	<-done
}
