package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

func call(t *testing.T, tool tools.Tool, key sessions.Key, session sessions.ID, args string) (string, error) {
	t.Helper()
	return tool.Run(context.Background(), tools.Call{SessionID: session, Key: key, ID: "call-1", Arguments: json.RawMessage(args)})
}

func TestToolsRegister(t *testing.T) {
	r := tools.NewRegistry()
	for _, tool := range Tools(NewStore(nil, nopIndex{})) {
		if err := r.Register(tool); err != nil {
			t.Fatalf("register %s: %v", tool.Name, err)
		}
	}
	if got := r.Names(); len(got) != 2 || got[0] != SearchToolName || got[1] != WriteToolName {
		t.Fatalf("registered %v", got)
	}
}

func TestToolsWriteAndSearch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		c := newClock()
		s := builtinStore(t, open(t), c)
		write, search := WriteTool(s), SearchTool(s)

		out, err := call(t, write, aliceKey, "sess-a", `{"content": "Alice is allergic to peanuts", "tags": ["health", "food"]}`)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`^Saved memory ([0-9a-f-]{36}) \(tags: health, food\)\.$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("memory_write said %q", out)
		}
		it, err := s.Item(context.Background(), alice, ItemID(m[1]))
		if err != nil || it.SessionID != "sess-a" || it.Content != "Alice is allergic to peanuts" {
			t.Fatalf("stored %+v (%v)", it, err)
		}
		c.Advance(24 * time.Hour)
		if _, err := s.IndexSummary(context.Background(), alice, Summary{SessionID: "sess-b", MessageID: "msg-b",
			Content: "Goal: plan a dinner without peanuts.\nNext steps: book the table."}); err != nil {
			t.Fatal(err)
		}

		out, err = call(t, search, aliceKey, "sess-c", `{"query": "peanuts"}`)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`2 memories match "peanuts", best first:`,
			"[memory] 2026-03-01, from session sess-a (id " + m[1] + ")\n   Alice is allergic to peanuts\n   tags: health, food",
			"[summary] 2026-03-02, from session sess-b",
			"   Goal: plan a dinner without peanuts.\n   Next steps: book the table.",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("memory_search output lacks %q:\n%s", want, out)
			}
		}

		// Bob, through the tool, finds nothing of Alice's.
		out, err = call(t, search, bobKey, "sess-bob", `{"query": "peanuts allergic alice dinner", "limit": 20}`)
		if err != nil || out != `No memories match "peanuts allergic alice dinner".` {
			t.Fatalf("bob's memory_search = %q, %v", out, err)
		}

		// Members of a group share its memories; a direct chat does not see them.
		groupKey := sessions.GroupKey("telegram", "-100", "default")
		if _, err := call(t, write, groupKey, "sess-g", `{"content": "The team offsite is in Porto"}`); err != nil {
			t.Fatal(err)
		}
		if out, _ := call(t, search, groupKey, "sess-g2", `{"query": "offsite"}`); !strings.Contains(out, "Porto") {
			t.Fatalf("the group can't find its memory: %q", out)
		}
		if out, _ := call(t, search, aliceKey, "sess-a", `{"query": "offsite porto"}`); strings.Contains(out, "Porto") {
			t.Fatalf("alice's direct chat found the group's memory: %q", out)
		}
	})
}

func TestToolsRejectBadArguments(t *testing.T) {
	s := builtinStore(t, dbtest.SQLite(t), newClock())
	write, search := WriteTool(s), SearchTool(s)
	for _, tc := range []struct {
		tool tools.Tool
		args string
		want string
	}{
		{write, `{}`, "content is required"},
		{write, ``, "content is required"},
		{write, `{"content": 5}`, "content must be a string"},
		{write, `{"content": "x", "tags": "a"}`, "tags must be a list of strings"},
		{write, `{"content": "x", "mood": "happy"}`, `unknown field "mood"`},
		{write, `not json`, "not a valid object"},
		{write, `{"content": "   "}`, "content is empty"},
		{write, fmt.Sprintf(`{"content": %q}`, strings.Repeat("a", MaxContentRunes+1)), "limit is 8000"},
		{write, `{"content": "x", "tags": ["a","b","c","d","e","f","g","h","i","j","k"]}`, "limit is 10"},
		{search, `{}`, "query is required"},
		{search, `{"query": ""}`, "query is required"},
		{search, `{"query": 7}`, "query must be a string"},
		{search, `{"query": "tea", "limit": 0}`, "limit 0 is out of range; use 1 to 20"},
		{search, `{"query": "tea", "limit": 21}`, "limit 21 is out of range"},
		{search, `{"query": "tea", "limit": 2.5}`, "limit must be a whole number"},
		{search, `{"query": "tea", "limit": "5"}`, "limit must be a whole number"},
		{search, `{"query": "*** () \"\""}`, "no words to search for"},
		{search, fmt.Sprintf(`{"query": %q}`, strings.Repeat("a ", maxQueryRunes)), "limit is 1000"},
	} {
		t.Run(tc.tool.Name+" "+tc.args[:min(len(tc.args), 40)], func(t *testing.T) {
			out, err := call(t, tc.tool, aliceKey, "s", tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), tc.tool.Name+": ") {
				t.Fatalf("%s(%s) = %q, %v; want an error saying %q", tc.tool.Name, tc.args, out, err, tc.want)
			}
		})
	}
	if n := count(t, s.db, "memory_items"); n != 0 {
		t.Fatalf("bad arguments stored %d items", n)
	}
}

func TestSearchOutputIsBounded(t *testing.T) {
	s := builtinStore(t, dbtest.SQLite(t), newClock())
	for range MaxSearchLimit {
		mustWrite(t, s, alice, "tea "+strings.Repeat("long text ", 790))
	}
	out, err := call(t, SearchTool(s), aliceKey, "s", `{"query": "tea", "limit": 20}`)
	if err != nil {
		t.Fatal(err)
	}
	if n := len([]rune(out)); n > MaxSearchLimit*(maxHitRunes+200) {
		t.Fatalf("output is %d characters", n)
	}
	if !strings.Contains(out, "more characters]") {
		t.Fatal("long memories are not marked as cut")
	}
}
