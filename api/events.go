package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/google/uuid"
)

// Event types on the SSE stream.
const (
	TypeTurnStarted      = "turn.started"
	TypeMessageDelta     = "message.delta"
	TypeToolStarted      = "tool.started"
	TypeToolCompleted    = "tool.completed"
	TypeToolRetrying     = "tool.retrying"
	TypeUsage            = "usage"
	TypeContextCompacted = "context.compacted"
	TypeStatus           = "status"
	TypeTurnFinished     = "turn.finished"
	TypeTurnJoined       = "turn.joined"
	TypeFile             = "file"

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

// DefaultEventBytes bounds the events an EventLog holds in memory (32 MiB).
const DefaultEventBytes = 32 << 20

// DefaultSweepEvery is how often Feed's loop drops runs past their retention.
const DefaultSweepEvery = time.Minute

// EventLogOptions configures an EventLog.
type EventLogOptions struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxBytes bounds the events held in memory, all sessions together;
	// past it the runs that finished first are dropped first. 0 means
	// DefaultEventBytes.
	MaxBytes int64
	// Retention is how long a finished run stays in memory; 0 means
	// DefaultRetention.
	Retention time.Duration
	// SweepEvery is how often Feed's loop drops runs past their
	// retention; 0 means DefaultSweepEvery.
	SweepEvery time.Duration
	// Runs keeps a compact record of every finished run in the database,
	// so a run dropped from memory is still replayed (?run_id=), rebuilt
	// from the session's stored messages. Nil keeps none.
	Runs *RunRecords
	Log  *slog.Logger
}

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
	opts      EventLogOptions
	// bytes is the size of the events the log holds (eventSize); done are
	// the finished runs it holds, in the order they finished.
	bytes int64
	done  []*runLog
	// doneDropped counts the dropped runs still in done.
	doneDropped int
	// pending are the records of finished runs Feed's loop has yet to store.
	pending []runRecord
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
	id        string
	sessionID string
	// following is the run that replaced this one, so a reader that lags
	// reads every run in turn.
	following  *runLog
	events     []Event // append-only; readers hold sub-slices
	finished   bool
	finishedAt time.Time
	// bytes is the size of events; dropped says the log let go of the run
	// (readers still holding it read it to its end).
	bytes   int64
	dropped bool
	// queued says the run is in the log's done queue.
	queued bool
	// The seqs of the first and last assistant or tool message stored
	// while the run was in progress, and its other run ids: its record.
	firstSeq, lastSeq int64
	runIDs            []string
	startedAt         time.Time
}

// NewEventLog returns an empty log with the default bounds. now may be nil
// (time.Now).
func NewEventLog(now func() time.Time) *EventLog {
	return NewEventLogWith(EventLogOptions{Now: now})
}

// NewEventLogWith returns an empty log configured by opts.
func NewEventLogWith(opts EventLogOptions) *EventLog {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultEventBytes
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = DefaultSweepEvery
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &EventLog{sessions: map[string]*sessionLog{}, now: opts.Now, retention: opts.Retention, opts: opts}
}

// Bytes is the size of the events the log holds in memory.
func (l *EventLog) Bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}

// MaxBytes is the log's bound in force.
func (l *EventLog) MaxBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opts.MaxBytes
}

// SetMaxBytes puts n (0: DefaultEventBytes) in place of the log's bound,
// as a reload of http.event_log_mb does; a smaller bound trims at once.
func (l *EventLog) SetMaxBytes(n int64) {
	if n <= 0 {
		n = DefaultEventBytes
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts.MaxBytes = n
	if l.bytes > n {
		l.trimLocked(time.Time{})
	}
}

// eventSize is what an event costs the log: its envelope and its text.
func eventSize(e Event) int64 {
	return int64(unsafe.Sizeof(e)) + int64(len(e.ID)+len(e.Type)+len(e.SessionID)+len(e.RunID)+len(e.Data))
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
	l.beginLocked(sl, sessionID, id)
	sl.run.runIDs = runIDs
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
	sl.run.runIDs = append(sl.run.runIDs, runIDs...)
	return sl.run.id
}

// beginLocked starts run id in sl; a run that falls out of the session's
// recent ones is dropped.
func (l *EventLog) beginLocked(sl *sessionLog, sessionID, id string) {
	run := &runLog{id: id, sessionID: sessionID, startedAt: l.now()}
	sl.run.following = run
	sl.run = run
	sl.recent = append(sl.recent, run)
	if len(sl.recent) > recentRuns {
		for _, old := range sl.recent[:len(sl.recent)-recentRuns] {
			l.releaseLocked(old)
		}
		sl.recent = slices.Delete(sl.recent, 0, len(sl.recent)-recentRuns)
	}
}

// finishLocked marks run finished and queues it for dropping.
func (l *EventLog) finishLocked(run *runLog) {
	run.finished, run.finishedAt = true, l.now()
	run.queued = true
	l.done = append(l.done, run)
}

// releaseLocked stops counting run's events: the log no longer holds it.
// A finished run also leaves the done queue, in batches, so the queue
// keeps no dropped run's events alive.
func (l *EventLog) releaseLocked(run *runLog) {
	if run.dropped {
		return
	}
	run.dropped = true
	l.bytes -= run.bytes
	if !run.queued {
		return
	}
	l.doneDropped++
	if l.doneDropped > 64 && l.doneDropped > len(l.done)/2 {
		l.done = slices.DeleteFunc(l.done, func(r *runLog) bool {
			if r.dropped {
				r.queued = false
			}
			return r.dropped
		})
		l.doneDropped = 0
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
		l.beginLocked(sl, e.SessionID, runID)
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
	size := eventSize(e)
	run.bytes += size
	if !run.dropped {
		l.bytes += size
	}
	if e.Type == TypeTurnFinished && !run.finished {
		l.finishLocked(run)
		if l.opts.Runs != nil {
			l.pending = append(l.pending, recordLocked(run))
		}
	}
	if l.bytes > l.opts.MaxBytes {
		l.trimLocked(time.Time{})
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
	l.dropSessionLocked(sessionID, sl)
}

func (l *EventLog) dropSessionLocked(id string, sl *sessionLog) {
	for _, run := range sl.recent {
		l.releaseLocked(run)
	}
	delete(l.sessions, id)
}

// Sweep drops the runs that finished longer than the retention ago, and
// the sessions left with no run and no reader. Feed's loop calls it on a
// timer, so a quiet daemon lets go of its runs too.
func (l *EventLog) Sweep() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(l.now().Add(-l.retention))
}

// Release drops every finished run now, as the end of its retention would:
// a daemon gone quiet after a busy spell then keeps no events nobody reads.
// A run still under way stays, and so does a session's latest run while
// the session has readers. With Runs set, a stream that asks for a dropped
// run later gets it rebuilt from the database; without, Release does
// nothing.
func (l *EventLog) Release() {
	if l.opts.Runs == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(l.now().Add(time.Nanosecond))
}

func (l *EventLog) sweepLocked(cutoff time.Time) {
	l.trimLocked(cutoff)
	for id, sl := range l.sessions {
		if len(sl.subs) == 0 && sl.run.id == "" {
			delete(l.sessions, id)
		}
	}
}

// trimLocked drops finished runs, those that finished first first, while
// the log holds more than MaxBytes or they finished before cutoff (when
// set). A session's latest run goes with its session, and stays while the
// session has readers: a reader waits on that run for the next one.
func (l *EventLog) trimLocked(cutoff time.Time) {
	var kept []*runLog
	for len(l.done) > 0 {
		run := l.done[0]
		if !run.dropped && l.bytes <= l.opts.MaxBytes && (cutoff.IsZero() || !run.finishedAt.Before(cutoff)) {
			break
		}
		l.done[0] = nil // the queue's array keeps no run it let go alive
		l.done = l.done[1:]
		run.queued = false
		if run.dropped {
			l.doneDropped--
			continue
		}
		sl := l.sessions[run.sessionID]
		switch {
		case sl == nil:
			l.releaseLocked(run)
		case sl.run == run && len(sl.subs) > 0:
			kept = append(kept, run)
		case sl.run == run:
			l.dropSessionLocked(run.sessionID, sl)
		default:
			sl.recent = slices.DeleteFunc(sl.recent, func(r *runLog) bool { return r == run })
			l.releaseLocked(run)
		}
	}
	for _, run := range kept {
		run.queued = true
	}
	if len(kept) > 0 {
		l.done = append(kept, l.done...)
	}
}

// Held says whether the log holds run id runID of sessionID (or the run
// that answers it) in memory.
func (l *EventLog) Held(sessionID, runID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.sessions[sessionID]
	if sl == nil {
		return false
	}
	want := sl.runOf(runID)
	for _, run := range sl.recent {
		if run.id == want && !run.dropped {
			return true
		}
	}
	return false
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
