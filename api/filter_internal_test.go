package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The event stream's filters keep exactly the events asked for: by type,
// by the tool a tool event names, and by time.
func TestEventFilters(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	tool := func(typ, name string, at int) Event {
		d, _ := json.Marshal(ToolData{CallID: "c-" + name, Name: name})
		return Event{ID: typ + ":" + name, Type: typ, TS: t0.Add(time.Duration(at) * time.Second), Data: d}
	}
	plain := func(typ string, at int) Event {
		return Event{ID: typ, Type: typ, TS: t0.Add(time.Duration(at) * time.Second), Data: json.RawMessage(`{}`)}
	}
	evs := []Event{plain(TypeTurnStarted, 0), tool(TypeToolStarted, "web_fetch", 1), tool(TypeToolCompleted, "web_fetch", 2),
		tool(TypeToolStarted, "ping", 3), tool(TypeToolCompleted, "ping", 4), plain(TypeMessageDelta, 5), plain(TypeTurnFinished, 6)}
	for _, tc := range []struct{ q, want string }{
		{"", "turn.started tool.started:web_fetch tool.completed:web_fetch tool.started:ping tool.completed:ping message.delta turn.finished"},
		{"type=turn.started,turn.finished", "turn.started turn.finished"},
		{"type=tool.completed", "tool.completed:web_fetch tool.completed:ping"},
		{"tool=web_fetch", "tool.started:web_fetch tool.completed:web_fetch"},
		{"tool=p*&type=tool.completed", "tool.completed:ping"},
		{"since=2026-11-29T08:00:02Z&until=2026-11-29T08:00:05Z", "tool.completed:web_fetch tool.started:ping tool.completed:ping"},
	} {
		f, err := parseFilter(httptest.NewRequest("GET", "/v1/sessions/x/events?"+tc.q, nil), true)
		if err != nil {
			t.Fatalf("?%s: %v", tc.q, err)
		}
		var got []string
		for _, e := range f.keepEvents(evs) {
			got = append(got, e.ID)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("?%s: %q, want %q", tc.q, strings.Join(got, " "), tc.want)
		}
	}
	if len(evs) != 7 {
		t.Fatal("filtering changed the events it was given")
	}
}
