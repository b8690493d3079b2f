package cron

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/textcut"
)

// Send takes the gateway's reply to a fire (out.ChatID is the run's
// "<jobId>:<ts>"). The run ends as ok with the reply as its result, unless
// it had ended already (timed out, or failed through Finish), and the
// result goes to the job's notify targets. An error means a notification
// failed: the outbox retries Send, and only what wasn't delivered is
// retried (each Notice has a stable key). A reply for a run that doesn't
// exist is dropped with a warning, since no retry could place it.
func (s *Scheduler) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	r, err := s.runOf(ctx, out.ChatID)
	if errors.Is(err, ErrNotFound) {
		s.log.WarnContext(ctx, "reply to an unknown cron run dropped", "chat_id", out.ChatID, "error", err)
		return adapters.Sent{}, nil
	}
	if err != nil {
		return adapters.Sent{}, err
	}
	r, err = s.end(ctx, r, StatusOK, "", out.Text, "")
	return adapters.Sent{MessageID: r.ID}, err
}

// Finish records how a cron session's turn ended. The daemon's run
// function may call it for sessions of kind "cron" with the session's id,
// the reply and the turn's error: it records the session id exactly, ends
// a failed run as error (the gateway's apology that follows through Send
// changes nothing) and ends a run whose reply was empty, which never
// reaches Send. Calling it is optional; Send alone records a reply.
func (s *Scheduler) Finish(ctx context.Context, chatID string, sessionID sessions.ID, reply string, runErr error) error {
	r, err := s.runOf(ctx, chatID)
	if err != nil {
		return err
	}
	status, errText := StatusOK, ""
	if runErr != nil {
		status, errText = StatusError, runErr.Error()
	}
	_, err = s.end(ctx, r, status, errText, reply, sessionID)
	return err
}

// runOf finds the run of a fire's chat id, "<jobId>:<unix ms>".
func (s *Scheduler) runOf(ctx context.Context, chatID string) (Run, error) {
	jobID, at, err := ParseChatID(chatID)
	if err != nil {
		return Run{}, err
	}
	return s.store.RunAt(ctx, jobID, at)
}

// ParseChatID splits a fire's chat id, "<jobId>:<unix ms>".
func ParseChatID(chatID string) (jobID string, at time.Time, err error) {
	i := strings.LastIndexByte(chatID, ':')
	if i <= 0 {
		return "", time.Time{}, fmt.Errorf("%w: %q is not a cron chat id (<job id>:<unix ms>)", ErrNotFound, chatID)
	}
	ms, err := strconv.ParseInt(chatID[i+1:], 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %q is not a cron chat id (<job id>:<unix ms>)", ErrNotFound, chatID)
	}
	return chatID[:i], time.UnixMilli(ms).UTC(), nil
}

// end ends a run with status (if it hadn't ended), keeps the result and
// session id, stops a timed-out turn and notifies the job's targets.
func (s *Scheduler) end(ctx context.Context, r Run, status Status, errText, result string, sid sessions.ID) (Run, error) {
	if sid == "" && r.SessionID == "" && s.opts.Session != nil && r.Status == StatusStarted {
		if id, err := s.opts.Session(ctx, r.SessionKey()); err == nil {
			sid = id
		} else if !errors.Is(err, sessions.ErrNotFound) {
			s.log.DebugContext(ctx, "find a cron run's session", "run_id", r.ID, "error", err)
		}
	}
	now := s.clock.Now()
	stored, ended, err := s.store.finish(ctx, r.ID, status, errText, result, sid, now)
	if err != nil {
		return r, err
	}
	if stored.Status.Finished() {
		s.mu.Lock()
		delete(s.running, r.ID)
		s.mu.Unlock()
	}
	if ended {
		if s.opts.OnEnd != nil {
			s.opts.OnEnd(stored.Status)
		}
		s.log.InfoContext(ctx, "cron run ended", "job_id", stored.JobID, "run_id", stored.ID, "status", stored.Status,
			"session_id", stored.SessionID, "took", now.Sub(stored.StartedAt).Round(time.Millisecond))
		if stored.Status == StatusError {
			s.log.WarnContext(ctx, "cron run failed", "job_id", stored.JobID, "run_id", stored.ID, "ref", stored.ID, "error", stored.Error)
		}
		if stored.Status == StatusTimeout && s.opts.Abort != nil {
			s.opts.Abort(stored.SessionKey())
		}
	}
	return stored, s.notify(ctx, stored)
}

// notify passes a finished run's result to its job's targets, once: a run
// whose targets all have it is marked, and a failed target is retried on
// the next call (the outbox's retry of Send) under the same keys.
func (s *Scheduler) notify(ctx context.Context, r Run) error {
	switch {
	case !r.Status.Finished() || r.Status == StatusSkipped || !r.NotifiedAt.IsZero():
		return nil
	case r.Status == StatusOK && strings.TrimSpace(r.Result) == "":
		return nil // an empty reply has nothing to say
	}
	j, err := s.store.Job(ctx, r.JobID)
	if errors.Is(err, ErrNotFound) {
		s.log.InfoContext(ctx, "cron run's job was removed; its result is recorded but not sent", "job_id", r.JobID, "run_id", r.ID)
		return nil
	}
	if err != nil {
		return err
	}
	if len(j.Notify) == 0 || s.opts.Notifier == nil {
		return nil // the receipt holds the result
	}
	text := noticeText(r)
	var errs []error
	var why []string
	for _, t := range j.Notify {
		n := Notice{Target: t, JobID: r.JobID, RunID: r.ID, Status: r.Status, Text: text,
			Key: NoticeKey(r.ID, t), Session: r.SessionKey()}
		if err := s.opts.Notifier.Notify(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("notify %s of cron run %s: %w", t, r.ID, err))
			why = append(why, err.Error())
		}
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		if rerr := s.store.recordNotifyError(ctx, r.ID, strings.Join(why, "; ")); rerr != nil {
			s.log.WarnContext(ctx, "cron run's notify error not recorded", "run_id", r.ID, "error", rerr)
		}
		return err
	}
	return s.store.markNotified(ctx, r.ID, s.clock.Now())
}

// NoticeKey is the idempotency key of run runID's notice to t: stable, so a
// retry sends it once, and the outbox rows that carry it (NoticeKey + ":"
// + chunk) tell whether it was delivered.
func NoticeKey(runID string, t Target) string { return "cron:" + runID + ":" + t.String() }

// noticeText is what a target is told of a run.
func noticeText(r Run) string {
	switch r.Status {
	case StatusError:
		// The targets may be a group: the error's text (a host, an SQL
		// error) stays in the receipt and the log, under the run's id.
		return fmt.Sprintf("Scheduled job %s failed (ref %s); the operator can see why with `parley cron runs %s`.", r.JobID, r.ID, r.JobID)
	case StatusTimeout:
		took := r.DeadlineAt.Sub(r.StartedAt)
		if took <= 0 {
			return fmt.Sprintf("Scheduled job %s did not finish in time and was stopped.", r.JobID)
		}
		return fmt.Sprintf("Scheduled job %s did not finish within %s and was stopped.", r.JobID, took)
	}
	return r.Result
}

// firstLine is an error's first line, cut at max bytes.
func firstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return textcut.Bytes(s, max, "…")
}
