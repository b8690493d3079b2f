package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"time"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/sessions"
)

// Feed subscribes to the bus at once and returns the loop that copies run
// events into the log, until ctx ends. Subscribing before the loop runs
// means no run started meanwhile is missed. Bus events become:
//
//	agent turn.started      → turn.started {agent_id, model, run_ids}, then status {state: busy}
//	agent turn.joined       → turn.joined {run_ids}
//	agent message.delta     → message.delta {text}
//	agent tool.started      → tool.started {call_id, name, state: input-available}
//	agent tool.completed    → tool.completed {call_id, name, state: output-available|output-error, result}
//	agent tool.requested    → tool.requested {call_id, name, arguments, expires_at} (a client tool's call)
//	agent status.changed    → status {state: waiting_for_tool_results, pending_tool_calls} (or busy again)
//	assistant message usage → usage {message_id, model, input, output, ...}
//	a file the reply carries → file {message_id, name, media_type, size, caption?, url} (send_file)
//	memory compaction       → context.compacted {summary_id, trigger, archived, ...}, then its copy
//	                          under the old name context_compacted (until the next release)
//	agent permission.requested → permission.requested {request_id, tool, arguments, choices, user, why, expires_at},
//	                          then status {state: waiting_for_permission}
//	agent permission.resolved  → permission.resolved {request_id, answer}, then status {state: busy}
//	agent turn.finished     → status {state: idle|error}, then turn.finished {steps, usage, aborted, error}
func (l *EventLog) Feed(bus *events.Bus) func(ctx context.Context) error {
	sub := bus.Subscribe(agent.EventTurnStarted, agent.EventMessageDelta, agent.EventToolStarted,
		agent.EventToolCompleted, agent.EventToolRetrying, agent.EventTurnFinished, agent.EventTurnJoined, memory.EventContextCompacted, sessions.EventMessageAppended,
		agent.EventPermissionRequested, agent.EventPermissionResolved,
		agent.EventToolRequested, agent.EventStatusChanged)
	return func(ctx context.Context) error {
		defer sub.Close()
		sweepCtx, stopSweep := context.WithCancel(ctx)
		swept := make(chan struct{})
		go func() { defer close(swept); l.sweepEvery(sweepCtx) }()
		defer func() { stopSweep(); <-swept }()
		for {
			e, err := sub.Next(ctx)
			if err != nil {
				if errors.Is(err, events.ErrClosed) || ctx.Err() != nil {
					return nil
				}
				return err
			}
			l.ingest(e)
		}
	}
}

// sweepEvery runs Sweep on a timer until ctx ends.
func (l *EventLog) sweepEvery(ctx context.Context) {
	t := time.NewTicker(l.opts.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.Sweep()
		}
	}
}

// Run event data, as the SSE stream shows it.
type (
	TurnStartedData struct {
		AgentID string `json:"agent_id"`
		Model   string `json:"model"`
		// RunIDs are the ids Send returned for the messages this run
		// answers; the run's own id is the first. Messages answered
		// together (debounce, collect) make one run under several ids.
		RunIDs []string `json:"run_ids,omitempty"`
	}
	// JoinedData says that the messages Send returned these ids for
	// joined the run in progress (steer).
	JoinedData struct {
		RunIDs []string `json:"run_ids"`
	}
	DeltaData struct {
		Text string `json:"text"`
	}
	ToolData struct {
		CallID string `json:"call_id"`
		Name   string `json:"name"`
		// State is input-available, output-available or output-error,
		// or retrying (tool.retrying).
		State  string `json:"state"`
		Result string `json:"result,omitempty"`
		// Attempts, on tool.completed, is how many tries the tool's retry
		// policy made, when more than one.
		Attempts int `json:"attempts,omitempty"`
		// On tool.retrying: the try that failed (from 1), its failure
		// class and error, and the wait before the next.
		Attempt   int    `json:"attempt,omitempty"`
		Class     string `json:"class,omitempty"`
		Error     string `json:"error,omitempty"`
		RetryInMS int64  `json:"retry_in_ms,omitempty"`
	}
	UsageData struct {
		MessageID  string  `json:"message_id,omitempty"`
		Model      string  `json:"model,omitempty"`
		Input      int64   `json:"input"`
		Output     int64   `json:"output"`
		Reasoning  int64   `json:"reasoning"`
		CacheRead  int64   `json:"cache_read"`
		CacheWrite int64   `json:"cache_write"`
		CostUSD    float64 `json:"cost_usd,omitempty"`
	}
	CompactedData struct {
		SummaryID    string `json:"summary_id"`
		Trigger      string `json:"trigger"`
		Summarized   int    `json:"summarized"`
		Archived     int    `json:"archived"`
		Memories     int    `json:"memories"`
		TokensBefore int64  `json:"tokens_before"`
		TokensAfter  int64  `json:"tokens_after"`
		DurationMS   int64  `json:"duration_ms"`
		Model        string `json:"model,omitempty"`
	}
	// FileData is a file a reply carries (send_file): URL downloads it
	// (GET /v1/sessions/{id}/files/{name}).
	FileData struct {
		MessageID string `json:"message_id"`
		Name      string `json:"name"`
		MediaType string `json:"media_type,omitempty"`
		Size      int64  `json:"size"`
		Caption   string `json:"caption,omitempty"`
		URL       string `json:"url"`
	}
	TurnFinishedData struct {
		// RunIDs are as on turn.started, which a run that failed before
		// it started never had.
		RunIDs  []string  `json:"run_ids,omitempty"`
		Steps   int       `json:"steps"`
		Usage   UsageData `json:"usage"`
		Aborted bool      `json:"aborted"`
		Error   string    `json:"error,omitempty"`
	}
)

func (l *EventLog) ingest(e events.Event) {
	sid := e.SessionID
	switch d := e.Data.(type) {
	case agent.TurnStarted:
		run := l.Start(sid, d.RunIDs...)
		l.Append(run, envelope(sid, TypeTurnStarted, e.At, TurnStartedData{AgentID: d.AgentID, Model: d.Model, RunIDs: d.RunIDs}))
		l.Append(run, envelope(sid, TypeStatus, e.At, Status{State: StateBusy, StartedAt: e.At}))
	case agent.TurnJoined:
		if run := l.Join(sid, d.RunIDs...); run != "" {
			l.Append(run, envelope(sid, TypeTurnJoined, e.At, JoinedData{RunIDs: d.RunIDs}))
		}
	case string:
		if e.Type == agent.EventMessageDelta {
			l.appendToRun(envelope(sid, TypeMessageDelta, e.At, DeltaData{Text: d}))
		}
	case agent.ToolEvent:
		switch {
		case e.Type == agent.EventToolStarted:
			l.appendToRun(envelope(sid, TypeToolStarted, e.At, ToolData{CallID: d.CallID, Name: d.Name, State: "input-available"}))
			return
		case e.Type == agent.EventToolRetrying && d.Retry != nil:
			l.appendToRun(envelope(sid, TypeToolRetrying, e.At, ToolData{CallID: d.CallID, Name: d.Name, State: "retrying",
				Attempt: d.Retry.N, Class: d.Retry.Class, Error: d.Retry.Error, RetryInMS: d.Wait.Milliseconds()}))
			return
		}
		state := "output-available"
		if d.IsError {
			state = "output-error"
		}
		l.appendToRun(envelope(sid, TypeToolCompleted, e.At, ToolData{CallID: d.CallID, Name: d.Name, State: state, Result: d.Result, Attempts: d.Attempts}))
	case agent.ToolRequested:
		l.appendToRun(envelope(sid, TypeToolRequested, e.At, ToolRequestedData{CallID: d.ID, Name: d.Name, Arguments: d.Arguments, ExpiresAt: d.ExpiresAt.UTC()}))
	case agent.Status:
		if e.Type == agent.EventStatusChanged {
			l.appendToRun(envelope(sid, TypeStatus, e.At, d))
		}
	case sessions.MessageAppended:
		m := d.Message
		l.noteMessage(sid, m)
		for _, f := range replyFiles(sid, m) {
			l.appendToRun(envelope(sid, TypeFile, e.At, f))
		}
		if m.Role != sessions.RoleAssistant || m.Usage == nil {
			return
		}
		u := *m.Usage
		l.appendToRun(envelope(sid, TypeUsage, e.At, UsageData{MessageID: string(m.ID), Model: m.Model, Input: u.Input,
			Output: u.Output, Reasoning: u.Reasoning, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, CostUSD: u.CostUSD}))
	case memory.ContextCompacted:
		data := CompactedData{SummaryID: string(d.SummaryID),
			Trigger: string(d.Trigger), Summarized: d.Summarized, Archived: d.Archived, Memories: d.Memories,
			TokensBefore: d.TokensBefore, TokensAfter: d.TokensAfter, DurationMS: d.Duration.Milliseconds(), Model: d.Model}
		l.appendToRun(envelope(sid, TypeContextCompacted, e.At, data))
		l.appendToRun(envelope(sid, TypeContextCompactedOld, e.At, data))
	case agent.PermissionRequested, agent.PermissionResolved:
		ev, _ := permissionEvent(sid, e.At, d)
		st := Status{State: StateWaitingForPermission}
		if _, done := d.(agent.PermissionResolved); done {
			st = Status{State: StateBusy}
		}
		l.appendToRun(ev)
		l.appendToRun(envelope(sid, TypeStatus, e.At, st))
	case agent.TurnFinished:
		st := Status{State: StateIdle}
		if d.Error != "" && !d.Aborted {
			st = Status{State: StateError, Message: d.Error}
		}
		run := l.activeRun(sid, d.RunIDs)
		l.Append(run, envelope(sid, TypeStatus, e.At, st))
		l.Append(run, envelope(sid, TypeTurnFinished, e.At, TurnFinishedData{RunIDs: d.RunIDs, Steps: d.Steps, Aborted: d.Aborted, Error: d.Error,
			Usage: UsageData{Input: d.Usage.Input, Output: d.Usage.Output, Reasoning: d.Usage.Reasoning,
				CacheRead: d.Usage.CacheRead, CacheWrite: d.Usage.CacheWrite}}))
		l.saveRecords()
	}
}

// noteMessage widens the session's run in progress to an assistant or
// tool message it stored, for the run's record.
func (l *EventLog) noteMessage(sessionID string, m sessions.Message) {
	if m.Role != sessions.RoleAssistant && m.Role != sessions.RoleTool {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.sessions[sessionID]
	if sl == nil || sl.run.id == "" || sl.run.finished {
		return
	}
	if sl.run.firstSeq == 0 || m.Seq < sl.run.firstSeq {
		sl.run.firstSeq = m.Seq
	}
	sl.run.lastSeq = max(sl.run.lastSeq, m.Seq)
}

// recordTimeout bounds one try at storing a run's record, which holds up
// the feed; recordPatience bounds the tries while the database is
// unavailable.
const (
	recordTimeout  = 5 * time.Second
	recordPatience = 30 * time.Second
)

// saveRecords stores the records of the runs that just finished, trying
// again for a while when the database is unavailable (a run whose record
// is missing can't be replayed once the log drops it, and a client that
// asks for it would wait for it for ever). A failure past that is logged.
func (l *EventLog) saveRecords() {
	l.mu.Lock()
	recs := l.pending
	l.pending = nil
	l.mu.Unlock()
	for _, rec := range recs {
		deadline := time.Now().Add(recordPatience)
		for delay := 100 * time.Millisecond; ; delay = min(delay*2, 2*time.Second) {
			ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
			err := l.opts.Runs.save(ctx, rec)
			cancel()
			if err == nil {
				break
			}
			if !dbutil.Unavailable(err) || time.Now().Add(delay).After(deadline) {
				l.opts.Log.Warn("run record not stored; a replay of the run after it leaves memory finds nothing",
					"session_id", rec.sessionID, "run_id", rec.runIDs[0], "error", err)
				break
			}
			time.Sleep(delay)
		}
	}
}

// PublishStatus adds a status event (e.g. retrying, with its attempt) to
// the session's run in progress; with none, it is dropped.
func (l *EventLog) PublishStatus(sessionID string, st Status) {
	l.mu.Lock()
	sl := l.sessions[sessionID]
	active := sl != nil && sl.run.id != "" && !sl.run.finished
	var run string
	if active {
		run = sl.run.id
	}
	l.mu.Unlock()
	if active {
		l.Append(run, envelope(sessionID, TypeStatus, time.Time{}, st))
	}
}

// activeRun is the session's run in progress or, with none, a new one
// under runIDs: a run that failed before it started still gets its status
// and finish.
func (l *EventLog) activeRun(sessionID string, runIDs []string) string {
	if id, active := l.Current(sessionID); active {
		return id
	}
	return l.Start(sessionID, runIDs...)
}

// appendToRun adds e to the session's latest run, in progress or not: an
// event outside a run (a compaction before a turn, or a manual one) joins
// the run before it. With no run yet, it gets a finished run of its own.
func (l *EventLog) appendToRun(e Event) {
	l.mu.Lock()
	sl := l.session(e.SessionID)
	if sl.run.id == "" {
		l.beginLocked(sl, e.SessionID, newRunID())
		l.finishLocked(sl.run)
	}
	run := sl.run.id
	l.mu.Unlock()
	l.Append(run, e)
}

func envelope(sessionID, typ string, at time.Time, data any) Event {
	b, err := json.Marshal(data)
	if err != nil {
		b = []byte("{}")
	}
	if !at.IsZero() {
		at = at.UTC()
	}
	return Event{Type: typ, TS: at, SessionID: sessionID, Data: b}
}

// replyFiles are the files a reply carries, as the stream and the reply
// callback show them.
func replyFiles(sid string, m sessions.Message) []FileData {
	var out []FileData
	for _, f := range files.Outgoing(m) {
		out = append(out, FileData{MessageID: string(m.ID), Name: f.Name, MediaType: f.MediaType, Size: f.Size, Caption: f.Caption,
			URL: "/v1/sessions/" + url.PathEscape(sid) + "/files/" + url.PathEscape(f.Name)})
	}
	return out
}
