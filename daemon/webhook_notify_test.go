package daemon

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/webhooks"
)

// A webhook reply that the outbox sends again (its first Send's success
// was lost, say to a dropped connection) queues its notify target's note
// once: the note is keyed by the delivery's reply, not a fresh id.
func TestWebhookNoteOnceWhenTheReplyIsSentAgain(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		rec := adapterstest.New()
		var hooks *webhooks.Server
		d, url, stop := testDaemonOn(t, dbURL, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg\n    type: telegram\n    token: \"\"\nhooks:\n  - id: ci\n    auth: hmac\n    secret: "+hookSecret+
			"\n    prompt: \"CI failed on {{.repo}}\"\n    notify: [\"tg:42\"]\n", func(d *Daemon) map[adapters.ID]adapters.Adapter {
			hooks = webhooks.New(webhooks.Options{Hooks: d.cfg().Hooks, DB: d.db, Notify: d.notify})
			return map[adapters.ID]adapters.Adapter{"tg": rec, webhooks.AdapterID: hooks}
		})
		defer stop()
		if status, out := postHook(t, http.DefaultClient, url+"/hooks/ci", []byte(`{"repo":"parley"}`)); status != http.StatusAccepted {
			t.Fatalf("delivery: %d %v", status, out)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := rec.WaitSent(wctx, 1); err != nil {
			t.Fatal(err)
		}
		// The reply as the outbox gave it to the hook's channel.
		var out adapters.Outbound
		out.Adapter = webhooks.AdapterID
		if err := d.db.Reader().QueryRowContext(ctx, `SELECT idempotency_key, chat_id, text FROM outbox WHERE adapter = 'webhook'`).
			Scan(&out.IdempotencyKey, &out.ChatID, &out.Text); err != nil {
			t.Fatal(err)
		}
		if _, err := hooks.Send(ctx, out); err != nil {
			t.Fatal(err)
		}
		var notes int
		if err := d.db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE adapter = 'tg' AND chat_id = '42'`).Scan(&notes); err != nil {
			t.Fatal(err)
		}
		if notes != 1 {
			t.Fatalf("%d notes queued for tg:42, want 1", notes)
		}
	})
}
