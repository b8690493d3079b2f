package api

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Event types on the SSE stream.
const (
	TypeTurnStarted      = "turn.started"
	TypeMessageDelta     = "message.delta"
	TypeToolStarted      = "tool.started"
	TypeToolCompleted    = "tool.completed"
	TypeUsage            = "usage"
	TypeContextCompacted = "context.compacted"
	TypeStatus           = "status"
	TypeTurnFinished     = "turn.finished"
	TypeTurnJoined       = "turn.joined"

	// TypeContextCompactedOld is context.compacted's name before the
	// dotted style: each context.compacted event is followed by a copy
	// under it, for clients that look for it, until the next release.
	//
	// Deprecated: use TypeContextCompacted.
	TypeContextCompactedOld = "context_compacted"
)

// Event is the SSE envelope: {id, type, ts, session_id, run_id, data}. ID is
// "<run_id>:<index>", the event's place in its run's log.
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	TS        time.Time       `json:"ts"`
	SessionID string          `json:"session_id"`
	RunID     string          `json:"run_id"`
	Data      json.RawMessage `json:"data"`
}

// ErrStreamClosed is returned by Stream.Next after Close.
var ErrStreamClosed = errors.New("event stream closed")

// DefaultRetention is how long a finished run's log stays for late readers
// when nothing else replaces it.
const DefaultRetention = 10 * time.Minute

// EventLog keeps, per session, the event log of its latest run in memory
// and fans it out to stream readers. A reader replays the current run from
// its first event and then follows it live, so one that reconnects mid-run
// misses nothing; closing a reader never touches the run. It is safe for
// concurrent use.
type EventLog struct {
	mu        sync.Mutex
	sessions  map[string]*sessionLog
	now       func() time.Time
	retention time.Duration
}

type sessionLog struct {
	run  *runLog
	subs map[*Stream]struct{}
	// recent are the latest runs, oldest first, the last being run.
	recent []*runLog
	// aliases maps the other run ids a run answers (messages answered
	// together) to the run's own id, the latest maxAliases of them.
	aliases map[string]string
	order   []string
}

// maxAliases bounds a session's aliases: only a recent run is replayed.
const maxAliases = 64

// alias records that id is answered by run.
func (sl *sessionLog) alias(id, run string) {
	if sl.aliases == nil {
		sl.aliases = map[string]string{}
	}
	if _, ok := sl.aliases[id]; !ok {
		sl.order = append(sl.order, id)
	}
	sl.aliases[id] = run
	if len(sl.order) > maxAliases {
		delete(sl.aliases, sl.order[0])
		sl.order = sl.order[1:]
	}
}

// runOf is the id of the run that answers run id id.
func (sl *sessionLog) runOf(id string) string {
	if run, ok := sl.aliases[id]; ok {
		return run
	}
	return id
}

type runLog struct {
	id string
	// following is the run that replaced this one, so a reader that lags
	// reads every run in turn.
	following  *runLog
	events     []Event // append-only; readers hold sub-slices
	finished   bool
	finishedAt time.Time
}

// NewEventLog returns an empty log. now may be nil (time.Now).
func NewEventLog(now func() time.Time) *EventLog {
	if now == nil {
		now = time.Now
	}
	return &EventLog{sessions: map[string]*sessionLog{}, now: now, retention: DefaultRetention}
}

func (l *EventLog) session(id string) *sessionLog {
	sl := l.sessions[id]
	if sl == nil {
		// An empty, finished run stands first, so a stream opened before any
		// run follows the chain from the very first one.
		sl = &sessionLog{subs: map[*Stream]struct{}{}, run: &runLog{finished: true}}
		l.sessions[id] = sl
	}
	return sl
}

// Start begins a new run in sessionID and returns its id: the first of
// runIDs, the ids its callers were given (the API's), or a new one. The
// others become aliases of it. The previous run's log is dropped once its
// readers have read it.
func (l *EventLog) Start(sessionID string, runIDs ...string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.session(sessionID)
	id := newRunID()
	if len(runIDs) > 0 {
		id = runIDs[0]
		for _, other := range runIDs[1:] {
			sl.alias(other, id)
		}
	}
	sl.begin(id)
	l.sweepLocked()
	return id
}

// Join records that runIDs joined sessionID's run in progress, and returns
// that run's id ("" with none in progress).
func (l *EventLog) Join(sessionID string, runIDs ...string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.session(sessionID)
	if sl.run.id == "" || sl.run.finished {
		return ""
	}
	for _, id := range runIDs {
		sl.alias(id, sl.run.id)
	}
	return sl.run.id
}

func (sl *sessionLog) begin(id string) {
	run := &runLog{id: id}
	sl.run.following = run
	sl.run = run
	sl.recent = append(sl.recent, run)
	if len(sl.recent) > recentRuns {
		sl.recent = slices.Delete(sl.recent, 0, len(sl.recent)-recentRuns)
	}
}

// recentRuns is how many of a session's latest runs ?run_id= can replay: a
// client that opens its stream after its run, and after another began.
const recentRuns = 4

// Current returns the id of sessionID's latest run and whether it is still
// going.
func (l *EventLog) Current(sessionID string) (runID string, active bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sl := l.sessions[sessionID]; sl != nil && sl.run.id != "" {
		return sl.run.id, !sl.run.finished
	}
	return "", false
}

// Append adds an event to run runID of e.SessionID, starting that run if it
// is not the session's current one, and wakes the readers. It fills in the
// envelope's id, run id and time (when zero). A turn.finished event ends
// the run.
func (l *EventLog) Append(runID string, e Event) Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.session(e.SessionID)
	if sl.run.id != runID {
		sl.begin(runID)
	}
	run := sl.run
	e.RunID = runID
	e.ID = runID + ":" + strconv.Itoa(len(run.events))
	if e.TS.IsZero() {
		e.TS = l.now().UTC()
	}
	if len(e.Data) == 0 {
		e.Data = json.RawMessage("{}")
	}
	run.events = append(run.events, e)
	if e.Type == TypeTurnFinished {
		run.finished, run.finishedAt = true, l.now()
	}
	for s := range sl.subs {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return e
}

// Forget drops a session's log (its session was deleted); its readers end.
func (l *EventLog) Forget(sessionID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.sessions[sessionID]
	if sl == nil {
		return
	}
	for s := range sl.subs {
		s.closeLocked()
	}
	delete(l.sessions, sessionID)
}

// sweepLocked drops sessions whose latest run finished long ago and that
// nobody reads.
func (l *EventLog) sweepLocked() {
	cutoff := l.now().Add(-l.retention)
	for id, sl := range l.sessions {
		if len(sl.subs) == 0 && sl.run.finished && sl.run.finishedAt.Before(cutoff) {
			delete(l.sessions, id)
		}
	}
}

// SubscribeOptions chooses where a stream starts.
type SubscribeOptions struct {
	// RunID replays that run from its first event if it is the session's
	// latest run, even when finished (a client that sent a message and
	// then opened the stream misses nothing). A message answered in a run
	// together with others names that run, whose events carry the id of
	// its first message.
	RunID string
	// LastEventID resumes after that event when it belongs to the latest
	// run (the SSE Last-Event-ID header).
	LastEventID string
}

// Subscribe opens a stream of sessionID's events. It starts at the first
// event of the current run when one is in progress (or as opts says), else
// with the next run. Close it when done.
func (l *EventLog) Subscribe(sessionID string, opts SubscribeOptions) *Stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.session(sessionID)
	s := &Stream{log: l, sessionID: sessionID, sl: sl, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.run = sl.run
	want := ""
	if opts.RunID != "" {
		want = sl.runOf(opts.RunID)
	}
	if want != "" && want != sl.run.id {
		// An earlier run: replay it, then follow the runs after it.
		for _, run := range sl.recent {
			if run.id == want {
				s.run = run
				sl.subs[s] = struct{}{}
				return s
			}
		}
	}
	if run := sl.run; run.id != "" {
		switch {
		case opts.LastEventID != "" && strings.HasPrefix(opts.LastEventID, run.id+":"):
			n, err := strconv.Atoi(strings.TrimPrefix(opts.LastEventID, run.id+":"))
			if err == nil && n >= 0 && n < len(run.events) {
				s.next = n + 1
			}
		case want == run.id, !run.finished:
			s.next = 0
		default:
			s.next = len(run.events)
		}
	}
	sl.subs[s] = struct{}{}
	return s
}

// Stream reads one session's events in order, across runs.
type Stream struct {
	log       *EventLog
	sessionID string
	sl        *sessionLog
	run       *runLog
	next      int
	wake      chan struct{}
	done      chan struct{}
	closed    bool
}

// Next returns the events that arrived since the last call, waiting for at
// least one until ctx ends or the stream closes. The returned slice must
// not be modified.
func (s *Stream) Next(ctx context.Context) ([]Event, error) {
	for {
		s.log.mu.Lock()
		if s.closed {
			s.log.mu.Unlock()
			return nil, ErrStreamClosed
		}
		if s.next < len(s.run.events) {
			batch := s.run.events[s.next:len(s.run.events):len(s.run.events)]
			s.next = len(s.run.events)
			s.log.mu.Unlock()
			return batch, nil
		}
		if s.run.following != nil {
			// The next run began: read it from its start.
			s.run, s.next = s.run.following, 0
			s.log.mu.Unlock()
			continue
		}
		s.log.mu.Unlock()
		select {
		case <-s.wake:
		case <-s.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close ends the stream. It does not touch the run.
func (s *Stream) Close() {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	s.closeLocked()
}

func (s *Stream) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	close(s.done)
	delete(s.sl.subs, s)
}

func newRunID() string {
	u, err := uuid.NewV7()
	if err != nil {
		return strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return u.String()
}
