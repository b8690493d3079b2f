package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
)

// A session POST /v1/sessions creates in a workspace keeps it: its
// messages run in it (not in a session of the same chat without one), and
// its memory is scoped to it; a bad workspace id is refused.
func TestAPISessionInAWorkspace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	c := &client.Client{Base: url, Token: apiToken}
	if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"workspace": "Team A"}, &struct{}{}); err == nil {
		t.Fatal("a bad workspace id was taken")
	}
	var s sessions.Session
	if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": "team", "user": "ann", "workspace": "team-a"}, &s); err != nil {
		t.Fatal(err)
	}
	if s.Key.WorkspaceID != "team-a" {
		t.Fatalf("created %+v", s.Key)
	}
	var run struct {
		RunID string `json:"run_id"`
	}
	if err := c.Do(ctx, "POST", "/v1/sessions/"+string(s.ID)+"/messages", map[string]any{"content": "hello team"}, &run); err != nil {
		t.Fatal(err)
	}
	if failure, err := c.Follow(ctx, string(s.ID), run.RunID, &nopWriter{}); err != nil || failure != "" {
		t.Fatalf("the run: %q, %v", failure, err)
	}
	msgs, err := d.sessions.Messages(ctx, s.ID, sessions.MessagesOptions{})
	if err != nil || len(msgs) != 2 || msgs[0].Content != "hello team" {
		t.Fatalf("the workspace's session holds %+v, %v", msgs, err)
	}
	page, err := d.sessions.List(ctx, sessions.ListOptions{Limit: 10})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("%d sessions, %v; want only the workspace's", len(page.Sessions), err)
	}
	if sc := memory.ScopeOf(page.Sessions[0].Key); sc.Workspace != "team-a" {
		t.Fatalf("its memory's scope %+v", sc)
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
