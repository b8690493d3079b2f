package agent

import (
	"fmt"
	"sync"
	"time"

	"github.com/parleyd/parley/sessions"
)

// State is what a session's agent is doing.
type State string

const (
	StateIdle     State = "idle"
	StateBusy     State = "busy"
	StateRetrying State = "retrying"
	StateError    State = "error"
	// StateWaitingForPermission: the turn waits for the person to answer
	// whether a tool may run (Message says which).
	StateWaitingForPermission State = "waiting_for_permission"
	// StateWaitingForToolResults: the run waits for the client to post
	// the results of the client tools the model called
	// (Status.PendingToolCalls).
	StateWaitingForToolResults State = "waiting_for_tool_results"
)

// Status is a session's in-memory run state.
type Status struct {
	State State `json:"state"`
	// Attempt is the failed attempt being retried, while retrying.
	Attempt int    `json:"attempt,omitempty"`
	Message string `json:"message,omitempty"`
	// StartedAt is when the current run started; zero when idle.
	StartedAt time.Time `json:"started_at,omitzero"`
	// PendingToolCalls are the ids of the client tool calls the run waits
	// for, while waiting_for_tool_results.
	PendingToolCalls []string `json:"pending_tool_calls,omitempty"`
}

// Statuses is the status board of every session with a run or an error.
// It is safe for concurrent use; unknown sessions are idle.
type Statuses struct {
	mu sync.Mutex
	m  map[sessions.ID]Status
}

// Get returns id's status, idle when nothing is known.
func (s *Statuses) Get(id sessions.ID) Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[id]; ok {
		return st
	}
	return Status{State: StateIdle}
}

func (s *Statuses) set(id sessions.ID, st Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.State == StateIdle || st.State == "" {
		delete(s.m, id)
		return
	}
	if s.m == nil {
		s.m = map[sessions.ID]Status{}
	}
	s.m[id] = st
}

// update changes id's status with fn, keeping what fn leaves alone.
func (s *Statuses) update(id sessions.ID, fn func(*Status)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[id]
	if !ok {
		st = Status{State: StateIdle}
	}
	fn(&st)
	if s.m == nil {
		s.m = map[sessions.ID]Status{}
	}
	s.m[id] = st
}

// All returns the status of every session that is not idle.
func (s *Statuses) All() map[sessions.ID]Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[sessions.ID]Status, len(s.m))
	for id, st := range s.m {
		out[id] = st
	}
	return out
}

// Line says what a status shows a person while the reply waits, or ""
// when it shows nothing more than a reply being written: "retrying,
// attempt 2: …", "compacting the conversation".
func (s Status) Line() string {
	switch {
	case s.State == StateRetrying:
		line := "retrying"
		if s.Attempt > 0 {
			line += fmt.Sprintf(", attempt %d", s.Attempt)
		}
		if s.Message != "" {
			line += ": " + s.Message
		}
		return line
	case s.State == StateBusy && s.Message != "":
		return s.Message
	}
	return ""
}
