package api

import (
	"encoding/json"
	"runtime"
	"strconv"
	"testing"
	"time"
	"weak"
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

// The runs a sweep (or Release) takes off the front of the done queue are
// gone from memory: the queue's array keeps no pointer to them. After a
// burst it kept every run it held, each with its events.
func TestDroppedRunsAreNotKeptByTheDoneQueue(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	l := NewEventLogWith(EventLogOptions{Now: func() time.Time { return now }, Retention: time.Minute})
	for i := range 2000 {
		session, run := "s"+strconv.Itoa(i%50), "r"+strconv.Itoa(i)
		l.Start(session, run)
		l.Append(run, Event{SessionID: session, Type: TypeMessageDelta, Data: json.RawMessage(`{"text":"hello"}`)})
		l.Append(run, Event{SessionID: session, Type: TypeTurnFinished})
	}
	l.mu.Lock()
	var queued []weak.Pointer[runLog]
	for _, r := range l.done {
		queued = append(queued, weak.Make(r))
	}
	l.mu.Unlock()
	now = now.Add(2 * time.Minute)
	l.Sweep()
	runtime.GC()
	kept := 0
	for _, r := range queued {
		if r.Value() != nil {
			kept++
		}
	}
	runtime.KeepAlive(l)
	if kept != 0 {
		t.Fatalf("%d of the %d swept runs are still in memory", kept, len(queued))
	}
}
