package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/sessionsql"
)

// A session's SQL database through the daemon: an agent may name
// sql_exec and sql_query, GET /v1/sessions/{id}/sql/schema shows its
// tables, a branch made through the API has its own copy, and the config's
// limits reach the store.
func TestSessionSQLThroughTheAPI(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, url, stop := testDaemonOn(t, dbURL, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\nsessions:\n  sql:\n    max_rows: 7\nagents:\n  - id: default\n    tools: [sql_exec, sql_query]\n", apiOnly)
		defer stop()
		if got := d.sql.Limits(); got.MaxRows != 7 || got.MaxBytes != sessionsql.DefaultMaxBytes {
			t.Fatalf("limits %+v, want the config's max_rows and the default size", got)
		}
		c := &client.Client{Base: url, Token: apiToken}
		var parent struct {
			ID string `json:"id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": "parent"}, &parent); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, "POST", "/v1/sessions/"+parent.ID+"/messages", map[string]any{"content": "hello"}, &struct{}{}); err != nil {
			t.Fatal(err)
		}
		var msgs []sessions.Message
		waitUntil(t, 20*time.Second, "the turn's reply and the run's end", func() bool {
			msgs, _ = d.sessions.Messages(ctx, sessions.ID(parent.ID), sessions.MessagesOptions{})
			var st struct {
				State string `json:"state"`
			}
			return len(msgs) >= 2 && c.Do(ctx, "GET", "/v1/sessions/"+parent.ID+"/status", nil, &st) == nil && st.State == "idle"
		})
		if _, err := d.sql.Exec(ctx, sessions.ID(parent.ID), `CREATE TABLE visits (at TEXT); CREATE INDEX visits_at ON visits (at)`); err != nil {
			t.Fatal(err)
		}
		var branch struct {
			ID string `json:"id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions/"+parent.ID+"/branch", map[string]any{"from_message_id": msgs[0].ID}, &branch); err != nil {
			t.Fatal(err)
		}
		if _, err := d.sql.Exec(ctx, sessions.ID(branch.ID), `CREATE TABLE only_here (x)`); err != nil {
			t.Fatal(err)
		}
		schema := func(id string) string {
			t.Helper()
			var sc sessionsql.Schema
			if err := c.Do(ctx, "GET", "/v1/sessions/"+id+"/sql/schema", nil, &sc); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range sc.Objects {
				names = append(names, o.Type+":"+o.Name)
			}
			return strings.Join(names, " ")
		}
		if got := schema(parent.ID); got != "table:visits index:visits_at" {
			t.Fatalf("the parent's schema: %s", got)
		}
		if got := schema(branch.ID); got != "table:only_here table:visits index:visits_at" {
			t.Fatalf("the branch's schema: %s", got)
		}
		err := c.Do(ctx, "GET", "/v1/sessions/01900000-0000-7000-8000-000000000000/sql/schema", nil, &struct{}{})
		if err == nil || !strings.Contains(err.Error(), "404") {
			t.Fatalf("an unknown session's schema: %v", err)
		}
	})
}
