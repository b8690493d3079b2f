package memory_test

import (
	"bytes"
	"context"
	"github.com/parleyd/parley/signing"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/webhooks"
)

// inboundSink keeps what the webhook server delivers, as the gateway would
// take it.
type inboundSink struct {
	mu  sync.Mutex
	got []adapters.Inbound
}

func (k *inboundSink) Deliver(_ context.Context, in adapters.Inbound) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = append(k.got, in)
	return nil
}

// A hook's deliveries share one memory scope, as a cron job's runs do: the
// session key is built the way the daemon builds it, from the message the
// webhook server delivers (whose chat id carries a random suffix).
func TestWebhookDeliveriesShareTheHooksScope(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef-secret"
	c, err := config.Parse([]byte("hooks:\n  - id: ci\n    auth: hmac\n    secret: "+secret+"\n    prompt: \"build {{.n}}\"\n"), "parley.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := webhooks.New(webhooks.Options{Hooks: c.Hooks, DB: dbtest.SQLite(t)})
	k := &inboundSink{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Start(ctx, k) }()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	for _, body := range []string{`{"n":1}`, `{"n":2}`} {
		ts, sig := signing.Sign(secret, time.Now(), []byte(body))
		req, _ := http.NewRequest("POST", hs.URL+"/hooks/ci", bytes.NewReader([]byte(body)))
		req.Header.Set("X-Parley-Timestamp", ts)
		req.Header.Set("X-Parley-Signature", sig)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("delivery: %d", res.StatusCode)
		}
	}
	k.mu.Lock()
	got := append([]adapters.Inbound(nil), k.got...)
	k.mu.Unlock()
	if len(got) != 2 || got[0].ChatID == got[1].ChatID {
		t.Fatalf("deliveries %+v: want two, in sessions of their own", got)
	}
	want := memory.Scope{Agent: "default", User: "group:webhook:ci"}
	for _, in := range got {
		key := gateway.SessionKey(in, "default")
		if key.Kind() != sessions.SurfaceWebhook {
			t.Fatalf("key %s is not a webhook session's", key)
		}
		if s := memory.ScopeOf(key); s != want {
			t.Fatalf("ScopeOf(%s) = %+v, want %+v", key, s, want)
		}
	}
}
