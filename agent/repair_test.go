package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

func TestRepairOrphans(t *testing.T) {
	ctx := context.Background()
	store := sessions.NewStore(dbtest.SQLite(t))
	s, _, err := store.Resolve(ctx, sessions.ChatKey("telegram", "1", "1", "default"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	// What a crash mid-run leaves: two calls, one answered.
	for _, m := range []sessions.Message{
		{Role: sessions.RoleUser, Content: "look things up"},
		{Role: sessions.RoleAssistant, ToolCalls: []sessions.ToolCall{
			{ID: "a", Name: "search", Arguments: json.RawMessage(`{}`)},
			{ID: "b", Name: "search", Arguments: json.RawMessage(`{}`)},
		}},
		{Role: sessions.RoleTool, ToolCallID: "a", Content: "found"},
	} {
		if _, err := store.Append(ctx, s.ID, m); err != nil {
			t.Fatal(err)
		}
	}
	r := New(Options{Store: store})
	n, err := r.RepairOrphans(ctx, s.ID)
	if err != nil || n != 1 {
		t.Fatalf("RepairOrphans = %d, %v; want 1", n, err)
	}
	msgs, _ := store.Messages(ctx, s.ID, sessions.MessagesOptions{})
	last := msgs[len(msgs)-1]
	if last.Role != sessions.RoleTool || last.ToolCallID != "b" || last.Content != AbortedByRestart || !last.Synthetic {
		t.Fatalf("repair appended %+v", last)
	}
	if n, err := r.RepairOrphans(ctx, s.ID); err != nil || n != 0 {
		t.Fatalf("second repair = %d, %v; want 0", n, err)
	}
}
