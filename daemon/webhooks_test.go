package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/signing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/webhooks"
)

const hookSecret = "0123456789abcdef0123456789abcdef-hook"

// runWithHooks starts the daemon with a recording channel "tg" and the
// hooks, serving its HTTP handler; it returns the server's URL.
func runWithHooks(tb testing.TB, hooks string) (*Daemon, *adapterstest.Recorder, string, func()) {
	tb.Helper()
	rec := adapterstest.New()
	d, url, stop := testDaemon(tb, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg\n    type: telegram\n    token: \"\"\n"+hooks, func(d *Daemon) map[adapters.ID]adapters.Adapter {
		return map[adapters.ID]adapters.Adapter{
			"tg":               rec,
			webhooks.AdapterID: webhooks.New(webhooks.Options{Hooks: d.cfg().Hooks, DB: d.db, Notify: d.gw.Notify}),
		}
	})
	return d, rec, url, stop
}

func postHook(tb testing.TB, client *http.Client, url string, body []byte) (int, map[string]any) {
	tb.Helper()
	ts, sig := signing.Sign(hookSecret, time.Now(), body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("X-Parley-Timestamp", ts)
	req.Header.Set("X-Parley-Signature", sig)
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// A CI failure posted to a hook becomes a turn in a fresh webhook session;
// the reply goes to the notify target's chat and joins its conversation.
func TestWebhookThroughTheDaemon(t *testing.T) {
	hooks := "hooks:\n  - id: ci\n    auth: hmac\n    secret: " + hookSecret + "\n    mode: sync\n    timeout: 20s\n" +
		"    prompt: \"CI failed on {{.repo}}\"\n    notify: [\"tg:42\"]\n"
	d, rec, url, stop := runWithHooks(t, hooks)
	defer stop()
	// The chat already has a conversation, which the report joins.
	ctx := context.Background()
	chatSess, _, err := d.sessions.Resolve(ctx, sessions.ChatKey("telegram", "42", "42", "default"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	status, out := postHook(t, http.DefaultClient, url+"/hooks/ci", []byte(`{"repo":"parley"}`))
	if status != 200 || !strings.Contains(fmt.Sprint(out["reply"]), "CI failed on parley") {
		t.Fatalf("sync hook: %d %v", status, out)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sent, err := rec.WaitSent(wctx, 1)
	if err != nil || sent[0].ChatID != "42" || !strings.Contains(sent[0].Text, "CI failed on parley") {
		t.Fatalf("notify target got %+v (%v)", sent, err)
	}
	msgs, err := d.sessions.Messages(ctx, chatSess.ID, sessions.MessagesOptions{})
	if err != nil || len(msgs) != 1 || msgs[0].Role != sessions.RoleAssistant || !strings.Contains(msgs[0].Content, "CI failed on parley") {
		t.Fatalf("the chat's conversation: %+v %v", msgs, err)
	}
	key, _ := out["session_key"].(string)
	if !strings.HasPrefix(key, "webhook:ci:") {
		t.Fatalf("session key %q", key)
	}
}

// BenchmarkWebhooksAsync: HMAC-signed deliveries in async mode from 16
// clients at once, each answered by the echo model through the daemon.
// It reports accepted requests per second and the p99 accept latency.
func BenchmarkWebhooksAsync(b *testing.B) {
	hooks := "hooks:\n  - id: ci\n    auth: hmac\n    secret: " + hookSecret + "\n    prompt: \"CI failed on {{.repo}}\"\n"
	_, _, url, stop := runWithHooks(b, hooks)
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const clients = 16
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < b.N; i += clients {
				body := []byte(fmt.Sprintf(`{"repo":"r%d"}`, i))
				t0 := time.Now()
				status, out := postHook(b, client, url+"/hooks/ci", body)
				took := time.Since(t0)
				if status != 202 {
					b.Errorf("status %d: %v", status, out)
					return
				}
				mu.Lock()
				lat = append(lat, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// Through the real gateway, a delivery's record and its message commit
// together: a repeated delivery id gets the first answer and starts
// nothing more.
func TestWebhookRepeatThroughTheDaemon(t *testing.T) {
	hooks := "hooks:\n  - id: ci\n    auth: hmac\n    secret: " + hookSecret + "\n    prompt: \"CI failed on {{.repo}}\"\n"
	d, _, url, stop := runWithHooks(t, hooks)
	defer stop()
	body := []byte(`{"repo":"parley"}`)
	send := func() (int, map[string]any) {
		ts, sig := signing.Sign(hookSecret, time.Now(), body)
		req, _ := http.NewRequest("POST", url+"/hooks/ci", bytes.NewReader(body))
		req.Header.Set("X-Parley-Timestamp", ts)
		req.Header.Set("X-Parley-Signature", sig)
		req.Header.Set("X-Parley-Delivery", "build-77")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	s1, first := send()
	s2, second := send()
	if s1 != 202 || s2 != 202 || first["delivery_id"] == nil || first["delivery_id"] != second["delivery_id"] {
		t.Fatalf("first %d %v, repeat %d %v", s1, first, s2, second)
	}
	n, err := d.store.Unanswered(context.Background())
	ds, derr := webhooks.Deliveries(context.Background(), d.db, "ci", 10)
	if err != nil || derr != nil || len(ds) != 1 {
		t.Fatalf("deliveries %d (%v), unanswered %d (%v)", len(ds), derr, n, err)
	}
	page, err := d.sessions.List(context.Background(), sessions.ListOptions{Limit: 10, Surface: "webhook"})
	if err != nil || len(page.Sessions) > 1 {
		t.Fatalf("webhook sessions: %d %v", len(page.Sessions), err)
	}
}
