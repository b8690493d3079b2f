package cron

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/textcut"
)

const (
	jobColumns = `id, schedule, timezone, agent_id, prompt, notify, enabled, catch_up_ms, timeout_ms,
	owner_user_id, owner_surface, owner_surface_id, source, created_at, updated_at`

	insertJobQuery = `INSERT INTO cron_jobs (` + jobColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)
	ON CONFLICT (id) DO NOTHING`

	jobQuery      = `SELECT ` + jobColumns + ` FROM cron_jobs WHERE id = $1`
	listJobsQuery = `SELECT ` + jobColumns + ` FROM cron_jobs ORDER BY id`
	// A user's jobs from any chat on the surface; a group's from that group.
	ownedJobsQuery = `SELECT ` + jobColumns + ` FROM cron_jobs
	WHERE owner_surface = $1 AND owner_user_id = $2 AND ($2 <> '' OR owner_surface_id = $3)
	ORDER BY created_at, id`
	countOwnedJobsQuery = `SELECT COUNT(*) FROM cron_jobs
	WHERE owner_surface = $1 AND owner_user_id = $2 AND ($2 <> '' OR owner_surface_id = $3)`
	deleteJobQuery = `DELETE FROM cron_jobs WHERE id = $1`
	enableJobQuery = `UPDATE cron_jobs SET enabled = $2, updated_at = $3 WHERE id = $1 AND enabled <> $2`

	runColumns = `id, job_id, agent_id, kind, status, scheduled_at, started_at, deadline_at, ended_at,
	notified_at, error, session_id, result, created_at, notify_error`

	// The unique (job_id, scheduled_at) makes a fire happen once, however
	// many replicas (or restarts) try it.
	insertRunQuery = `INSERT INTO cron_runs (` + runColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, $10, '', '', $11, '')
	ON CONFLICT (job_id, scheduled_at) DO NOTHING`

	// A run still inside its deadline; one past it was left by a crash or
	// a dead replica and blocks nothing.
	liveRunQuery = `SELECT scheduled_at FROM cron_runs
	WHERE job_id = $1 AND status = 'started' AND deadline_at > $2 AND id <> $3
	ORDER BY scheduled_at LIMIT 1`

	lastScheduledQuery = `SELECT MAX(scheduled_at) FROM cron_runs WHERE job_id = $1 AND kind <> 'manual'`
	runsQuery          = `SELECT ` + runColumns + ` FROM cron_runs WHERE job_id = $1 ORDER BY scheduled_at DESC LIMIT $2`
	runQuery           = `SELECT ` + runColumns + ` FROM cron_runs WHERE id = $1`
	runAtQuery         = `SELECT ` + runColumns + ` FROM cron_runs WHERE job_id = $1 AND scheduled_at = $2`
	openRunsQuery      = `SELECT ` + runColumns + ` FROM cron_runs WHERE status IN ('queued', 'started') ORDER BY scheduled_at, id`

	claimQueuedQuery = `UPDATE cron_runs SET status = $2, started_at = $3, deadline_at = $4, ended_at = $5, error = $6
	WHERE id = $1 AND status = 'queued'`

	// A run ends once: whoever ends it first (the reply, a failure, the
	// timeout) decides its status.
	finishRunQuery = `UPDATE cron_runs SET status = $2, ended_at = $3, error = $4
	WHERE id = $1 AND status IN ('queued', 'started')`

	markNotifiedQuery = `UPDATE cron_runs SET notified_at = $2, notify_error = '' WHERE id = $1 AND notified_at IS NULL`

	notifyErrorQuery = `UPDATE cron_runs SET notify_error = $2 WHERE id = $1 AND notified_at IS NULL`

	// The reply and the session are kept whoever ended the run, unless
	// something was recorded first.
	annotateRunQuery = `UPDATE cron_runs SET
		result = CASE WHEN result = '' THEN $2 ELSE result END,
		session_id = CASE WHEN session_id = '' THEN $3 ELSE session_id END
	WHERE id = $1`
)

// MaxResultBytes caps the reply kept in a receipt; a longer one is cut at a
// character boundary and says how much was left out.
const MaxResultBytes = 64 << 10

// maxErrorBytes caps the error text kept in a receipt.
const maxErrorBytes = 2000

// MaxRunsLimit caps Runs' limit.
const MaxRunsLimit = 1000

// Store keeps jobs (cron_jobs) and run receipts (cron_runs).
type Store struct {
	db  *dbutil.DB
	now func() time.Time
	// instance names this Store's process in the config jobs it declares
	// (cron_config_declarations).
	instance string

	mu sync.Mutex
	// config is the config's jobs as SyncConfig last stored them; nil
	// until it runs (a CLI's store declares nothing).
	config []Job
}

// NewStore returns a Store on a migrated database; now may be nil for
// time.Now.
func NewStore(db *dbutil.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now, instance: uuid.NewString()}
}

// Add stores a new job (from the CLI or a tool), generating its id when
// empty. It is an error if the id is taken, by any job.
func (s *Store) Add(ctx context.Context, j Job) (Job, error) {
	if j.Source == "" {
		j.Source = SourceCLI
	}
	if j.ID == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return Job{}, fmt.Errorf("generate job id: %w", err)
		}
		j.ID = u.String()
	}
	if err := j.Validate(); err != nil {
		return Job{}, err
	}
	now := s.now()
	j.CreatedAt, j.UpdatedAt = now.UTC().Truncate(time.Millisecond), now.UTC().Truncate(time.Millisecond)
	notify, err := encodeTargets(j.Notify)
	if err != nil {
		return Job{}, err
	}
	res, err := s.db.Write().ExecContext(ctx, insertJobQuery, j.ID, strings.TrimSpace(j.Schedule), strings.TrimSpace(j.Timezone),
		j.AgentID, j.Prompt, notify, j.Enabled(), j.CatchUp.Milliseconds(), j.Timeout.Milliseconds(),
		j.Owner.UserID, j.Owner.Surface, j.Owner.SurfaceID, string(j.Source), dbutil.Millis(now))
	if err != nil {
		return Job{}, fmt.Errorf("add cron job %s: %w", j.ID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return Job{}, fmt.Errorf("%w: %s; pick another id, or remove that one first", ErrExists, j.ID)
	}
	j.Schedule, j.Timezone = strings.TrimSpace(j.Schedule), strings.TrimSpace(j.Timezone)
	return j, nil
}

// Job returns the job with id.
func (s *Store) Job(ctx context.Context, id string) (Job, error) {
	j, err := dbutil.ViewRow(ctx, s.db, jobQuery, scanJob, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Job{}, fmt.Errorf("read cron job %s: %w", id, err)
	}
	return j, nil
}

// List returns every job, by id.
func (s *Store) List(ctx context.Context) ([]Job, error) {
	return s.listJobs(ctx, listJobsQuery)
}

// Owned returns the jobs o owns (see Owner.Owns), oldest first.
func (s *Store) Owned(ctx context.Context, o Owner) ([]Job, error) {
	if o.IsZero() {
		return nil, nil
	}
	return s.listJobs(ctx, ownedJobsQuery, o.Surface, o.UserID, o.SurfaceID)
}

func (s *Store) countOwned(ctx context.Context, o Owner) (int, error) {
	var n int
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, countOwnedJobsQuery, o.Surface, o.UserID, o.SurfaceID).Scan(&n)
	})
	return n, err
}

func (s *Store) listJobs(ctx context.Context, query string, args ...any) ([]Job, error) {
	jobs, err := dbutil.ViewQuery(ctx, s.db, query, scanJob, args...)
	if err != nil {
		return nil, fmt.Errorf("list cron jobs: %w", err)
	}
	return jobs, nil
}

// Remove deletes a CLI or tool job; its receipts stay. A config job is
// refused with ErrConfigJob: the next start would bring it back.
func (s *Store) Remove(ctx context.Context, id string) error {
	j, err := s.Job(ctx, id)
	if err != nil {
		return err
	}
	if j.Source == SourceConfig {
		return fmt.Errorf("%w: %s; remove it from the config file's cron jobs instead", ErrConfigJob, id)
	}
	return s.delete(ctx, id)
}

// SetEnabled turns a CLI or tool job on or off; a running scheduler picks
// the change up at its next look. A config job is refused with
// ErrConfigJob: the config says whether it is enabled.
func (s *Store) SetEnabled(ctx context.Context, id string, enabled bool) error {
	j, err := s.Job(ctx, id)
	if err != nil {
		return err
	}
	if j.Source == SourceConfig {
		return fmt.Errorf("%w: %s; set enabled: %v on it in the config file's cron jobs instead", ErrConfigJob, id, enabled)
	}
	if _, err := s.db.Write().ExecContext(ctx, enableJobQuery, id, enabled, dbutil.Millis(s.now())); err != nil {
		return fmt.Errorf("update cron job %s: %w", id, err)
	}
	return nil
}

// RemoveOwned deletes a job only if o owns it (ErrNotOwner otherwise).
func (s *Store) RemoveOwned(ctx context.Context, id string, o Owner) error {
	j, err := s.Job(ctx, id)
	if err != nil {
		return err
	}
	if !j.Owner.Owns(o) {
		return fmt.Errorf("%w: %s", ErrNotOwner, id)
	}
	return s.delete(ctx, id)
}

func (s *Store) delete(ctx context.Context, id string) error {
	res, err := s.db.Write().ExecContext(ctx, deleteJobQuery, id)
	if err != nil {
		return fmt.Errorf("remove cron job %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return nil
}

// Runs returns a job's receipts, newest first, at most limit (1 to
// MaxRunsLimit; 0 means 20).
func (s *Store) Runs(ctx context.Context, jobID string, limit int) ([]Run, error) {
	if limit == 0 {
		limit = 20
	}
	if limit < 0 || limit > MaxRunsLimit {
		return nil, fmt.Errorf("runs limit %d is out of range; use 1 to %d", limit, MaxRunsLimit)
	}
	return s.listRuns(ctx, runsQuery, jobID, limit)
}

// Run returns one receipt by its id.
func (s *Store) Run(ctx context.Context, id string) (Run, error) {
	return s.oneRun(ctx, runQuery, id)
}

// RunAt returns the receipt of a job's fire scheduled at at.
func (s *Store) RunAt(ctx context.Context, jobID string, at time.Time) (Run, error) {
	return s.oneRun(ctx, runAtQuery, jobID, dbutil.Millis(at))
}

func (s *Store) oneRun(ctx context.Context, query string, args ...any) (Run, error) {
	r, err := dbutil.ViewRow(ctx, s.db, query, scanRun, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("%w: no such run", ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("read cron run: %w", err)
	}
	return r, nil
}

func (s *Store) listRuns(ctx context.Context, query string, args ...any) ([]Run, error) {
	runs, err := dbutil.ViewQuery(ctx, s.db, query, scanRun, args...)
	if err != nil {
		return nil, fmt.Errorf("list cron runs: %w", err)
	}
	return runs, nil
}

// RequestRun queues a manual run of a job for the running scheduler, which
// picks it up within its poll interval: how `parley cron run ID` reaches a
// daemon in another process. The no-overlap rule applies when it starts.
func (s *Store) RequestRun(ctx context.Context, id string) (Run, error) {
	j, err := s.Job(ctx, id)
	if err != nil {
		return Run{}, err
	}
	now := s.now()
	return manualAt(id, now, func(at time.Time) (Run, error) {
		return s.insertRun(ctx, s.db.Write(), j, at, KindManual, StatusQueued, now, "")
	})
}

// manualAt records a manual run at now, or a millisecond or a few later if
// another run of the job has that time (a scheduled fire of the same
// instant): (job, scheduled time) is a run's identity.
func manualAt(jobID string, now time.Time, insert func(at time.Time) (Run, error)) (Run, error) {
	for i := range 10 {
		r, err := insert(now.Add(time.Duration(i) * time.Millisecond))
		if !errors.Is(err, errFireTaken) {
			return r, err
		}
	}
	return Run{}, fmt.Errorf("%w: %s at %s; try again", ErrBusy, jobID, now.UTC().Format(time.RFC3339Nano))
}

// errFireTaken means the fire's receipt exists already: another replica or
// an earlier attempt has it.
var errFireTaken = errors.New("fire already recorded")

// errJobChanged means the job a scheduler is about to fire is no longer
// stored as it read it: changed (another replica's config, the CLI),
// disabled or removed since. It reads the jobs again instead.
var errJobChanged = errors.New("cron job changed or removed since it was read")

// currentJobQuery finds a job as a scheduler read it: same version
// (updated_at), still enabled.
const currentJobQuery = `SELECT 1 FROM cron_jobs WHERE id = $1 AND updated_at = $2 AND enabled = $3`

// begin records a fire: started, or skipped while an earlier run of the job
// is live (no overlap). errFireTaken means someone recorded it first.
func (s *Store) begin(ctx context.Context, j Job, at time.Time, kind Kind, now time.Time) (Run, error) {
	var r Run
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		// A scheduled fire is of the job as this scheduler read it,
		// checked where the fire is recorded: a replica whose copy is out
		// of date fires nothing. (A manual run reads the job just before.)
		if kind != KindManual {
			var one int
			err := q.QueryRowContext(ctx, currentJobQuery, j.ID, dbutil.Millis(j.UpdatedAt), true).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return errJobChanged
			}
			if err != nil {
				return fmt.Errorf("check cron job %s: %w", j.ID, err)
			}
		}
		status, errText, err := s.overlap(ctx, q, j.ID, "", now)
		if err != nil {
			return err
		}
		r, err = s.insertRun(ctx, q, j, at, kind, status, now, errText)
		return err
	})
	if err != nil {
		return Run{}, err
	}
	return r, nil
}

// overlap is the status a new run of jobID gets at now: started, or skipped
// (with why) while another run (not except) is live.
func (s *Store) overlap(ctx context.Context, q dbutil.Querier, jobID, except string, now time.Time) (Status, string, error) {
	var busy int64
	err := q.QueryRowContext(ctx, liveRunQuery, jobID, dbutil.Millis(now), except).Scan(&busy)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return StatusStarted, "", nil
	case err != nil:
		return "", "", fmt.Errorf("check for a running fire of %s: %w", jobID, err)
	}
	return StatusSkipped, "the run scheduled at " + dbutil.Time(busy).Format(time.RFC3339) + " was still running", nil
}

func deadline(r Run, j Job, now time.Time) time.Time {
	if r.Status != StatusStarted {
		return time.Time{}
	}
	return now.Add(j.EffectiveTimeout()).UTC().Truncate(time.Millisecond)
}

// insertRun writes a receipt; a skipped one is ended at once.
func (s *Store) insertRun(ctx context.Context, q dbutil.Querier, j Job, at time.Time, kind Kind, status Status, now time.Time, errText string) (Run, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return Run{}, fmt.Errorf("generate run id: %w", err)
	}
	ms := func(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
	r := Run{ID: u.String(), JobID: j.ID, AgentID: j.AgentID, Kind: kind, Status: status,
		ScheduledAt: ms(at), Error: truncate(errText, maxErrorBytes), CreatedAt: ms(now)}
	switch status {
	case StatusStarted:
		r.StartedAt = ms(now)
		r.DeadlineAt = deadline(r, j, now)
	case StatusSkipped:
		r.EndedAt = ms(now)
	}
	res, err := q.ExecContext(ctx, insertRunQuery, r.ID, r.JobID, r.AgentID, string(r.Kind), string(r.Status),
		dbutil.Millis(r.ScheduledAt), dbutil.NullMillis(r.StartedAt), dbutil.NullMillis(r.DeadlineAt),
		dbutil.NullMillis(r.EndedAt), r.Error, dbutil.Millis(r.CreatedAt))
	if err != nil {
		return Run{}, fmt.Errorf("record a fire of %s: %w", j.ID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return Run{}, errFireTaken
	}
	return r, nil
}

// claim starts a queued manual run (or skips it, while another run of the
// job is live). ok is false when someone else claimed it.
func (s *Store) claim(ctx context.Context, r Run, j Job, now time.Time) (Run, bool, error) {
	claimed := false
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		status, errText, err := s.overlap(ctx, q, j.ID, r.ID, now)
		if err != nil {
			return err
		}
		r.Status, r.Error = status, errText
		r.StartedAt, r.DeadlineAt, r.EndedAt = time.Time{}, time.Time{}, time.Time{}
		if status == StatusStarted {
			r.StartedAt, r.DeadlineAt = now.UTC().Truncate(time.Millisecond), deadline(Run{Status: status}, j, now)
		} else {
			r.EndedAt = now.UTC().Truncate(time.Millisecond)
		}
		res, err := q.ExecContext(ctx, claimQueuedQuery, r.ID, string(r.Status), dbutil.NullMillis(r.StartedAt),
			dbutil.NullMillis(r.DeadlineAt), dbutil.NullMillis(r.EndedAt), r.Error)
		if err != nil {
			return fmt.Errorf("start queued run of %s: %w", j.ID, err)
		}
		n, err := res.RowsAffected()
		claimed = err == nil && n == 1
		return nil
	})
	return r, claimed, err
}

// finish ends a started run with status, and keeps result and sessionID
// unless some were recorded first. ended is false when the run had already
// ended; the returned run is as stored afterwards either way.
func (s *Store) finish(ctx context.Context, runID string, status Status, errText, result string, sessionID sessions.ID, now time.Time) (Run, bool, error) {
	ended := false
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		res, err := q.ExecContext(ctx, finishRunQuery, runID, string(status), dbutil.Millis(now), truncate(errText, maxErrorBytes))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ended = err == nil && n == 1
		if result != "" || sessionID != "" {
			_, err = q.ExecContext(ctx, annotateRunQuery, runID, truncate(result, MaxResultBytes), string(sessionID))
		}
		return err
	})
	if err != nil {
		return Run{}, false, fmt.Errorf("record the end of cron run %s: %w", runID, err)
	}
	r, err := s.Run(ctx, runID)
	return r, ended, err
}

// markNotified records that every notify target has the run's result.
func (s *Store) markNotified(ctx context.Context, runID string, now time.Time) error {
	if _, err := s.db.Write().ExecContext(ctx, markNotifiedQuery, runID, dbutil.Millis(now)); err != nil {
		return fmt.Errorf("record the notification of cron run %s: %w", runID, err)
	}
	return nil
}

// recordNotifyError keeps why run runID's result has not reached its
// targets yet, for its receipt.
func (s *Store) recordNotifyError(ctx context.Context, runID, why string) error {
	if _, err := s.db.Write().ExecContext(ctx, notifyErrorQuery, runID, why); err != nil {
		return fmt.Errorf("record why cron run %s's result was not sent: %w", runID, err)
	}
	return nil
}

// lastScheduled is when the job's latest scheduled (not manual) fire was
// due, if it has one.
func (s *Store) lastScheduled(ctx context.Context, jobID string) (time.Time, error) {
	var ms sql.NullInt64
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, lastScheduledQuery, jobID).Scan(&ms)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the last fire of %s: %w", jobID, err)
	}
	return dbutil.NullTime(ms), nil
}

// openRuns are the runs queued or started, oldest first.
func (s *Store) openRuns(ctx context.Context) ([]Run, error) {
	return s.listRuns(ctx, openRunsQuery)
}

func scanJob(row dbutil.Scanner) (Job, error) {
	var (
		j                Job
		notify, source   string
		catchUp, timeout int64
		created, updated int64
		enabled          bool
	)
	if err := row.Scan(&j.ID, &j.Schedule, &j.Timezone, &j.AgentID, &j.Prompt, &notify, &enabled, &catchUp, &timeout,
		&j.Owner.UserID, &j.Owner.Surface, &j.Owner.SurfaceID, &source, &created, &updated); err != nil {
		return Job{}, err
	}
	if err := json.Unmarshal([]byte(notify), &j.Notify); err != nil {
		return Job{}, fmt.Errorf("cron job %s: notify is not a list of targets: %w", j.ID, err)
	}
	j.Disabled = !enabled
	j.CatchUp, j.Timeout = time.Duration(catchUp)*time.Millisecond, time.Duration(timeout)*time.Millisecond
	j.Source = Source(source)
	j.CreatedAt, j.UpdatedAt = dbutil.Time(created), dbutil.Time(updated)
	return j, nil
}

func scanRun(row dbutil.Scanner) (Run, error) {
	var (
		r                        Run
		kind, status, sid        string
		scheduled, created       int64
		started, deadline, ended sql.NullInt64
		notified                 sql.NullInt64
	)
	if err := row.Scan(&r.ID, &r.JobID, &r.AgentID, &kind, &status, &scheduled, &started, &deadline, &ended,
		&notified, &r.Error, &sid, &r.Result, &created, &r.NotifyError); err != nil {
		return Run{}, err
	}
	r.Kind, r.Status, r.SessionID = Kind(kind), Status(status), sessions.ID(sid)
	r.ScheduledAt, r.CreatedAt = dbutil.Time(scheduled), dbutil.Time(created)
	r.StartedAt, r.DeadlineAt, r.EndedAt = dbutil.NullTime(started), dbutil.NullTime(deadline), dbutil.NullTime(ended)
	r.NotifiedAt = dbutil.NullTime(notified)
	return r, nil
}

func encodeTargets(ts []Target) (string, error) {
	if ts == nil {
		ts = []Target{}
	}
	b, err := json.Marshal(ts)
	if err != nil {
		return "", fmt.Errorf("encode notify targets: %w", err)
	}
	return string(b), nil
}

// truncate cuts s to at most max bytes at a character boundary, saying how
// much was left out.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	note := fmt.Sprintf("\n[… %d more bytes not kept]", len(s)-max)
	return textcut.Bytes(s, max-len(note), note)
}
