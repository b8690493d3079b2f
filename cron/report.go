package cron

import (
	"context"
	"errors"
	"strings"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
)

// QueueNote queues a note to a target in q, the transaction that stores a
// fire's reply: Options.QueueNote. The daemon chunks it for the target's
// channel under n.Key, the keys Notifier.Notify uses, so a note is queued
// once whichever comes first.
type QueueNote func(ctx context.Context, q dbutil.Querier, n Notice) error

// Report queues a fire's reply to its job's notify targets in q, the
// transaction that stores the reply (the gateway calls it: the scheduler
// is a gateway.Reporter), so the report goes through the outbox once, to
// its chats, under the run's keys. The run's receipt is ended by Finish,
// after the turn; a failed turn, an empty reply, or a job without targets
// queue nothing here.
//
// The files the reply carries (a report's CSV, written with file_write and
// sent with send_file) go with each note, after its text.
func (s *Scheduler) Report(ctx context.Context, q dbutil.Querier, in adapters.Inbound, _, text string, files []adapters.OutFile, failed bool) error {
	if failed || strings.TrimSpace(text) == "" && len(files) == 0 || s.opts.QueueNote == nil {
		return nil
	}
	r, err := s.runOf(ctx, in.ChatID)
	if errors.Is(err, ErrNotFound) {
		return nil // Finish, after the turn, says so in the log
	}
	if err != nil {
		return err
	}
	j, err := s.store.Job(ctx, r.JobID)
	if errors.Is(err, ErrNotFound) {
		return nil // its job was removed: the receipt keeps the result
	}
	if err != nil {
		return err
	}
	// The text Finish's notice will have: the result as the receipt keeps it.
	r.Status, r.Result = StatusOK, truncate(text, MaxResultBytes)
	for _, t := range j.Notify {
		n := Notice{Target: t, JobID: r.JobID, RunID: r.ID, Status: r.Status, Text: noticeText(r),
			Key: NoticeKey(r.ID, t), Session: r.SessionKey(), Files: files}
		if err := s.opts.QueueNote(ctx, q, n); err != nil {
			// A target that can't be queued (a channel not running here)
			// is left to Finish's notify, which records and retries it.
			s.log.DebugContext(ctx, "queue a cron note with its reply", "run_id", r.ID, "target", t, "error", err)
		}
	}
	return nil
}

// Reported does nothing: Finish, after the turn, ends the run's receipt
// and adds the notes to the target chats' conversations.
func (s *Scheduler) Reported(context.Context, adapters.Inbound, string, string, []adapters.OutFile, bool) {
}
