package daemon

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/dbutil"
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
			hooks = webhooks.New(webhooks.Options{Hooks: d.cfg().Hooks, DB: d.db, Notify: d.gw.Notify, QueueNote: d.gw.QueueNote})
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
		// The reply crossed the outbox once: straight to the note's chat,
		// nothing addressed to the hook's own channel.
		var toHook int
		if err := d.db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE adapter = 'webhook'`).Scan(&toHook); err != nil {
			t.Fatal(err)
		}
		if toHook != 0 {
			t.Fatalf("%d outbox rows addressed to the webhook channel, want none", toHook)
		}
		// The reply reported again (a turn run again after a crash) queues
		// no second note: the same key.
		var in adapters.Inbound
		var key, text string
		if err := d.db.Reader().QueryRowContext(ctx, `SELECT i.id, i.chat_id, s.reply FROM inbound i JOIN webhook_deliveries s ON s.session_key = 'webhook:' || i.chat_id WHERE i.adapter = 'webhook'`).
			Scan(&key, &in.ChatID, &text); err != nil {
			t.Fatal(err)
		}
		in.Adapter = webhooks.AdapterID
		if err := d.db.Tx(ctx, func(q dbutil.Querier) error { return hooks.Report(ctx, q, in, key+":0", text, nil, false) }); err != nil {
			t.Fatal(err)
		}
		hooks.Reported(ctx, in, key+":0", text, nil, false)
		var notes int
		if err := d.db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE adapter = 'tg' AND chat_id = '42'`).Scan(&notes); err != nil {
			t.Fatal(err)
		}
		if notes != 1 {
			t.Fatalf("%d notes queued for tg:42, want 1", notes)
		}
	})
}
