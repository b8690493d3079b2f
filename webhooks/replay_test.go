package webhooks

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/api/openapitest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// txSink is the gateway as DeliverWith sees it: the message and the
// delivery's record in one transaction of the hook's database.
type txSinkFake struct {
	sink
	db *dbutil.DB
}

func (k *txSinkFake) DeliverWith(ctx context.Context, in adapters.Inbound, also func(q dbutil.Querier) error) error {
	return k.db.Tx(ctx, func(q dbutil.Querier) error {
		if err := also(q); err != nil {
			return err
		}
		return k.Deliver(ctx, in)
	})
}

// clock is a settable Now.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// setupOn is setup on a given database, with the gateway taking the
// delivery's record in its own transaction when tx is set.
func setupGuarded(t *testing.T, db *dbutil.DB, hooks string, tx bool, now func() time.Time, set ...func(*Options)) (*Server, *sink, *httptest.Server) {
	t.Helper()
	c, err := config.Parse([]byte(hooks), "parley.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Hooks: c.Hooks, DB: db, Now: now}
	for _, f := range set {
		f(&opts)
	}
	srv := New(opts)
	var k *sink
	var target adapters.Sink
	if tx {
		f := &txSinkFake{sink: sink{srv: srv}, db: db}
		k, target = &f.sink, f
	} else {
		k = &sink{srv: srv}
		target = k
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Start(ctx, target) }()
	mux := http.NewServeMux()
	mux.Handle("/hooks/{id}", srv)
	hs := openapitest.Server(t, mux)
	t.Cleanup(func() { hs.Close(); cancel(); wg.Wait() })
	return srv, k, hs
}

const githubHook = "hooks:\n  - id: gh\n    auth: github\n    secret: " + secret + "\n    prompt: \"PR {{.pull_request.title}}\"\n"

func with(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

// A captured request sent again within its window, under another delivery
// id, none, or its signature's hex in capitals, is refused; the same
// delivery id sent again still gets the first answer (a sender's retry).
func TestReplayedRequestIsRefused(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		for _, tx := range []bool{false, true} {
			name := "own transaction"
			if tx {
				name = "gateway transaction"
			}
			t.Run(name, func(t *testing.T) {
				db := open(t)
				_, k, hs := setupGuarded(t, db, hmacHook+strings.TrimPrefix(githubHook, "hooks:\n"), tx, nil)
				body := []byte(`{"repo":"parley","pull_request":{"title":"Fix"}}`)
				t0 := time.Now()
				hdr := with(signed(body, t0), "X-Parley-Delivery", "d1")
				s1, first := post(t, hs.URL+"/hooks/ci", body, hdr)
				if s1 != 202 {
					t.Fatalf("first: %d %v", s1, first)
				}
				for _, tc := range []struct {
					name string
					hdr  map[string]string
				}{
					{"another delivery id", with(hdr, "X-Parley-Delivery", "d2")},
					{"no delivery id", with(hdr, "X-Parley-Delivery", "")},
					{"an Idempotency-Key instead", with(hdr, "X-Parley-Delivery", "", "Idempotency-Key", "k9")},
					{"signature in capitals", with(hdr, "X-Parley-Delivery", "d3", "X-Parley-Signature", "sha256="+strings.ToUpper(strings.TrimPrefix(hdr["X-Parley-Signature"], "sha256=")))},
				} {
					if status, out := post(t, hs.URL+"/hooks/ci", body, tc.hdr); status != 409 || errorCode(out) != "replayed" {
						t.Fatalf("hmac replay with %s: %d %v", tc.name, status, out)
					}
				}
				if status, again := post(t, hs.URL+"/hooks/ci", body, hdr); status != 202 || again["delivery_id"] != first["delivery_id"] {
					t.Fatalf("the same delivery again: %d %v, first %v", status, again, first)
				}
				// A fresh signature of the same body is a new request.
				if status, out := post(t, hs.URL+"/hooks/ci", body, with(signed(body, t0.Add(-30*time.Second)), "X-Parley-Delivery", "d4")); status != 202 {
					t.Fatalf("freshly signed: %d %v", status, out)
				}

				gh := map[string]string{"X-Hub-Signature-256": githubSig(body), "X-GitHub-Delivery": "g1"}
				if status, out := post(t, hs.URL+"/hooks/gh", body, gh); status != 202 {
					t.Fatalf("github: %d %v", status, out)
				}
				other := []byte(`{"pull_request":{"title":"Other"}}`)
				for _, tc := range []struct {
					name string
					body []byte
					hdr  map[string]string
				}{
					{"another delivery id", body, with(gh, "X-GitHub-Delivery", "g2")},
					{"no delivery id", body, with(gh, "X-GitHub-Delivery", "")},
					{"an X-Parley-Delivery beside it", body, with(gh, "X-GitHub-Delivery", "g3", "X-Parley-Delivery", "p1")},
					{"its delivery id on another body", other, with(gh, "X-Hub-Signature-256", githubSig(other), "X-Parley-Delivery", "p2")},
				} {
					if status, out := post(t, hs.URL+"/hooks/gh", tc.body, tc.hdr); status != 409 || errorCode(out) != "replayed" {
						t.Fatalf("github replay with %s: %d %v", tc.name, status, out)
					}
				}
				if n := len(k.delivered()); n != 3 {
					t.Fatalf("%d deliveries started, want 3", n)
				}
			})
		}
	})
}

// A github hook's signature is refused for 24 h, then taken again; the
// sweep deletes what is past its time. A delivery the gateway couldn't
// take leaves its signature free for the sender's retry.
func TestReplayMarksExpireAndFailuresFreeThem(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		var c clock
		c.set(time.Now())
		srv, k, hs := setupGuarded(t, db, githubHook, false, c.now)
		body := []byte(`{"pull_request":{"title":"Fix"}}`)
		gh := map[string]string{"X-Hub-Signature-256": githubSig(body)}

		k.mu.Lock()
		k.fail = errors.New("database is locked")
		k.mu.Unlock()
		if status, _ := post(t, hs.URL+"/hooks/gh", body, gh); status != 503 {
			t.Fatalf("failing gateway: %d", status)
		}
		if status, out := post(t, hs.URL+"/hooks/gh", body, gh); status != 202 {
			t.Fatalf("retry after a failure: %d %v", status, out)
		}
		c.advance(GitHubReplayWindow - time.Minute)
		if status, out := post(t, hs.URL+"/hooks/gh", body, gh); status != 409 || errorCode(out) != "replayed" {
			t.Fatalf("within 24 h: %d %v", status, out)
		}
		c.advance(2 * time.Minute)
		if status, out := post(t, hs.URL+"/hooks/gh", body, gh); status != 202 {
			t.Fatalf("after 24 h: %d %v", status, out)
		}
		count := func() int {
			var n int
			if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM webhook_replay`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count(); n != 1 {
			t.Fatalf("%d marks kept, want 1", n)
		}
		c.advance(GitHubReplayWindow + time.Second)
		if err := srv.sweepReplays(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 0 {
			t.Fatalf("%d marks left after the sweep", n)
		}
	})
}

// A 503 (the delivery could not be stored) says when to try again.
func TestUnavailableHasRetryAfter(t *testing.T) {
	db := dbtest.SQLite(t)
	_, k, hs := setupGuarded(t, db, hmacHook, false, nil)
	k.mu.Lock()
	k.fail = errors.New("database is locked")
	k.mu.Unlock()
	body := []byte(`{"repo":"parley"}`)
	req, _ := http.NewRequest("POST", hs.URL+"/hooks/ci", strings.NewReader(string(body)))
	for key, v := range signed(body, time.Now()) {
		req.Header.Set(key, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != RetryAfterSeconds {
		t.Fatalf("%d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
