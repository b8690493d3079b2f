package daemon

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/parleyd/parley/client"
)

// A turn from the API is answered in the session, which its caller reads:
// nothing is queued in the outbox for a channel that sends nowhere, as the
// API declares (adapters.RepliesToCaller).
func TestAPITurnQueuesNoOutboxRow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	c := &client.Client{Base: url, Token: apiToken}
	var sess struct {
		ID string `json:"id"`
	}
	if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{}, &sess); err != nil {
		t.Fatal(err)
	}
	var run struct {
		RunID string `json:"run_id"`
	}
	if err := c.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/messages", map[string]any{"content": "hello"}, &run); err != nil {
		t.Fatal(err)
	}
	if err := c.Stream(ctx, sess.ID, run.RunID, io.Discard); err != nil {
		t.Fatal(err)
	}
	var msgs struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := c.Do(ctx, "GET", "/v1/sessions/"+sess.ID+"/messages", nil, &msgs); err != nil {
		t.Fatal(err)
	}
	if n := len(msgs.Messages); n < 2 || msgs.Messages[n-1].Role != "assistant" {
		t.Fatalf("the session holds %+v, want the reply", msgs.Messages)
	}
	var rows int
	if err := d.db.Read().QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE adapter = 'api'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatalf("%d outbox rows queued for the API, which sends nowhere", rows)
	}
}
