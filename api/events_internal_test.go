package api

import (
	"encoding/json"
	"strconv"
	"testing"
)

// A long chat's runs leave its recent few as they finish; the queue of
// finished runs lets go of them too, so it keeps no dropped run's events
// alive past the byte budget's reach.
func TestDoneQueueForgetsDroppedRuns(t *testing.T) {
	l := NewEventLog(nil)
	for i := range 5000 {
		run := "r" + strconv.Itoa(i)
		l.Start("chat", run)
		l.Append(run, Event{SessionID: "chat", Type: TypeMessageDelta, Data: json.RawMessage(`{"text":"hello"}`)})
		l.Append(run, Event{SessionID: "chat", Type: TypeTurnFinished})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.done); n > 2*64+2*recentRuns {
		t.Fatalf("the done queue holds %d runs for a chat that keeps %d", n, recentRuns)
	}
	live := 0
	for _, r := range l.done {
		if !r.dropped {
			live++
		}
	}
	if live != recentRuns || l.doneDropped != len(l.done)-live {
		t.Fatalf("%d live of %d queued, %d counted dropped", live, len(l.done), l.doneDropped)
	}
}
