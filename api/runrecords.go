package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

const insertRunRecordQuery = `
INSERT INTO api_runs (run_id, own_run_id, session_id, first_seq, last_seq, started, status, finished, started_at, finished_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (run_id) DO NOTHING`

const runRecordQuery = `
SELECT own_run_id, first_seq, last_seq, started, status, finished, started_at, finished_at
FROM api_runs WHERE run_id = $1 AND session_id = $2`

// RunRecords keeps a compact record of each finished run (its turn.started,
// last status and turn.finished data, and the seqs of the messages it
// stored), so a run the event log dropped from memory is replayed by
// rebuilding its events from the session's stored messages. The record is
// a row per run, not per event: a run's deltas are already stored, as its
// messages.
type RunRecords struct {
	db *dbutil.DB
}

// NewRunRecords returns the run records kept in db.
func NewRunRecords(db *dbutil.DB) *RunRecords { return &RunRecords{db: db} }

// runRecord is one finished run, as stored.
type runRecord struct {
	runIDs                    []string // the run's own id first
	sessionID                 string
	firstSeq, lastSeq         int64
	started, status, finished json.RawMessage
	startedAt, finishedAt     time.Time
}

func (rr *RunRecords) save(ctx context.Context, rec runRecord) error {
	return rr.db.Tx(ctx, func(q dbutil.Querier) error {
		for _, id := range rec.runIDs {
			if _, err := q.ExecContext(ctx, insertRunRecordQuery, id, rec.runIDs[0], rec.sessionID, rec.firstSeq, rec.lastSeq,
				string(rec.started), string(rec.status), string(rec.finished),
				dbutil.Millis(rec.startedAt), dbutil.Millis(rec.finishedAt)); err != nil {
				return fmt.Errorf("store run record %s: %w", id, err)
			}
		}
		return nil
	})
}

func (rr *RunRecords) load(ctx context.Context, sessionID, runID string) (runRecord, bool, error) {
	var rec runRecord
	var own, started, status, finished string
	var startedAt, finishedAt int64
	err := rr.db.Read().QueryRowContext(ctx, runRecordQuery, runID, sessionID).Scan(&own, &rec.firstSeq, &rec.lastSeq,
		&started, &status, &finished, &startedAt, &finishedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("read run record %s: %w", runID, err)
	}
	rec.runIDs, rec.sessionID = []string{own}, sessionID
	rec.started, rec.status, rec.finished = json.RawMessage(started), json.RawMessage(status), json.RawMessage(finished)
	rec.startedAt, rec.finishedAt = dbutil.Time(startedAt), dbutil.Time(finishedAt)
	return rec, true, nil
}

// recordLocked is run's record: its first turn.started, its last status
// and its turn.finished.
func recordLocked(run *runLog) runRecord {
	rec := runRecord{runIDs: []string{run.id}, sessionID: run.sessionID, firstSeq: run.firstSeq, lastSeq: run.lastSeq,
		started: json.RawMessage("{}"), status: json.RawMessage("{}"), finished: json.RawMessage("{}"),
		startedAt: run.startedAt, finishedAt: run.finishedAt}
	for _, id := range run.runIDs {
		if id != run.id {
			rec.runIDs = append(rec.runIDs, id)
		}
	}
	for _, e := range run.events {
		switch e.Type {
		case TypeTurnStarted:
			if string(rec.started) == "{}" {
				rec.started = e.Data
			}
		case TypeStatus:
			rec.status = e.Data
		case TypeTurnFinished:
			rec.finished = e.Data
		}
	}
	return rec
}

// Replay rebuilds from the database the events of run runID of sessionID,
// when the log no longer holds it: turn.started, a message.delta with each
// assistant message's whole text, its tool calls and results, its usage,
// then the run's last status and turn.finished. found is false when no
// record of the run is kept.
func (l *EventLog) Replay(ctx context.Context, store Store, sessionID, runID string) (evs []Event, found bool, err error) {
	if l.opts.Runs == nil {
		return nil, false, nil
	}
	rec, found, err := l.opts.Runs.load(ctx, sessionID, runID)
	if err != nil || !found {
		return nil, found, err
	}
	var msgs []sessions.Message
	if rec.firstSeq > 0 && rec.lastSeq >= rec.firstSeq {
		msgs, err = store.Messages(ctx, sessions.ID(sessionID), sessions.MessagesOptions{
			Limit: int(rec.lastSeq-rec.firstSeq) + 1, After: &sessions.Position{Seq: rec.firstSeq - 1}})
		if err != nil {
			return nil, true, fmt.Errorf("read run %s's messages: %w", runID, err)
		}
	}
	own := rec.runIDs[0]
	add := func(typ string, at time.Time, data json.RawMessage) {
		evs = append(evs, Event{ID: own + ":" + strconv.Itoa(len(evs)), Type: typ, TS: at.UTC(), SessionID: sessionID, RunID: own, Data: data})
	}
	mustJSON := func(v any) json.RawMessage {
		b, _ := json.Marshal(v)
		return b
	}
	add(TypeTurnStarted, rec.startedAt, rec.started)
	add(TypeStatus, rec.startedAt, mustJSON(Status{State: StateBusy, StartedAt: rec.startedAt}))
	tools := map[string]string{}
	for _, m := range msgs {
		if m.Seq < rec.firstSeq || m.Seq > rec.lastSeq {
			continue
		}
		switch m.Role {
		case sessions.RoleAssistant:
			if m.Content != "" {
				add(TypeMessageDelta, m.CreatedAt, mustJSON(DeltaData{Text: m.Content}))
			}
			for _, c := range m.ToolCalls {
				tools[c.ID] = c.Name
				add(TypeToolStarted, m.CreatedAt, mustJSON(ToolData{CallID: c.ID, Name: c.Name, State: "input-available"}))
			}
			for _, f := range replyFiles(string(m.SessionID), m) {
				add(TypeFile, m.CreatedAt, mustJSON(f))
			}
			if u := m.Usage; u != nil {
				add(TypeUsage, m.CreatedAt, mustJSON(UsageData{MessageID: string(m.ID), Model: m.Model, Input: u.Input, Output: u.Output,
					Reasoning: u.Reasoning, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, CostUSD: u.CostUSD}))
			}
		case sessions.RoleTool:
			add(TypeToolCompleted, m.CreatedAt, mustJSON(ToolData{CallID: m.ToolCallID, Name: tools[m.ToolCallID],
				State: "output-available", Result: m.Content}))
		}
	}
	add(TypeStatus, rec.finishedAt, rec.status)
	add(TypeTurnFinished, rec.finishedAt, rec.finished)
	return evs, true, nil
}
