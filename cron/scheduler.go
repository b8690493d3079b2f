// Package cron runs scheduled prompts. Jobs come from the config, the CLI
// and the schedule_* tools and live in cron_jobs; each fire is an
// adapters.Inbound delivered to the gateway like any channel's message (in
// a fresh session "cron:<jobId>:<ts>"), and leaves a receipt in cron_runs.
// The Scheduler is itself an adapter: the gateway sends it the agent's
// reply, which it records and passes on to the job's notify targets.
package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/telemetry"
)

// Clock is the scheduler's time source; tests use a fake one
// (crontest.Clock) and never wait for real time.
type Clock interface {
	Now() time.Time
	// At returns a channel that receives once the clock reaches t (at
	// once if it has), and a function that cancels the wait.
	At(t time.Time) (c <-chan time.Time, stop func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) At(t time.Time) (<-chan time.Time, func()) {
	tm := time.NewTimer(time.Until(t))
	return tm.C, func() { tm.Stop() }
}

// Notice is one run's result on its way to one notify target.
type Notice struct {
	Target Target
	JobID  string
	RunID  string
	Status Status // ok, error or timeout
	// Text is the agent's reply, or a line saying the run failed or timed
	// out.
	Text string
	// Key is stable for the run and target: queue the outbox reply (and
	// append the context message) under it, so a notification retried
	// after a failure or a crash arrives once.
	Key string
	// Session is the run's session key, "cron:<jobId>:<ts>".
	Session sessions.Key
	// Files are the files the run's reply carries, from its session's
	// file store, sent after Text (QueueNote's notes only: the notes
	// queued with the reply).
	Files []adapters.OutFile
}

// Notifier delivers a run's result to a chat. The daemon's queues an
// outbox reply to the target adapter and chat, and appends the text to the
// target chat's session as context, so a user can answer "tell me more".
type Notifier interface {
	Notify(ctx context.Context, n Notice) error
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, n Notice) error

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, n Notice) error { return f(ctx, n) }

// Options configure a Scheduler.
type Options struct {
	Store *Store
	// Clock defaults to real time.
	Clock Clock
	// ID is the adapter id the gateway knows the scheduler by, and that
	// fires carry as Inbound.Adapter. Default "cron".
	ID adapters.ID
	// Notifier delivers results to notify targets; nil records them only.
	Notifier Notifier
	// QueueNote queues a fire's report to a target inside the transaction
	// that stores the reply (Report); nil leaves it all to Notifier.
	QueueNote QueueNote
	// Abort stops a run's session turn when it times out; the daemon
	// passes gateway.Abort.
	Abort func(key sessions.Key) bool
	// Session finds the session a run's turn ran in, to record its id in
	// the receipt: the daemon passes a lookup of the active session for the
	// key. Optional; Finish also records it.
	Session func(ctx context.Context, key sessions.Key) (sessions.ID, error)
	// Grace is how late a fire may start and still count as on time
	// (startup, a slow machine). Later than Grace and the job's catch_up, it
	// is recorded as skipped. Default 1m.
	Grace time.Duration
	// OnEnd, if set, hears of each run's end: its status (metrics).
	OnEnd func(status Status)
	// Unattended is the policy that answers a run's permission questions
	// (nobody watches a cron run): the tools its job allows. Nil allows
	// none.
	Unattended func(chatID string) *permissions.Unattended
	// Jobs, if set, says how many jobs the config defines, for the
	// start-up log.
	Jobs func() int
	// Poll is how often the job list is read again (for jobs the CLI
	// changed in another process) and queued manual runs are started.
	// Default 15s.
	Poll time.Duration
	// Tracer, when set, starts a trace at each fire; the turn it runs
	// hangs under it.
	Tracer *telemetry.Tracer
	Log    *slog.Logger
}

// Defaults for Options.
const (
	DefaultID    adapters.ID = "cron"
	DefaultGrace             = time.Minute
	DefaultPoll              = 15 * time.Second
)

// Scheduler fires jobs into the gateway and records their receipts. It is
// an adapters.Adapter: Start runs the schedule, Send takes a run's reply.
type Scheduler struct {
	opts   Options
	store  *Store
	clock  Clock
	log    *slog.Logger
	kick   chan struct{}
	reload atomic.Bool

	mu      sync.Mutex
	sink    adapters.Sink
	running map[string]Run // runs this process started, by run id

	// jobs belongs to the Start loop's goroutine.
	jobs map[string]*entry
}

type entry struct {
	job   Job
	sched Schedule
	next  time.Time
}

var (
	_ adapters.Adapter  = (*Scheduler)(nil)
	_ adapters.Declarer = (*Scheduler)(nil)
)

// Source declares the scheduler as a source of messages: a run reports to
// its job's notify targets (Report), and nobody watches it, so its job's
// allow_tools answers its permission questions.
func (s *Scheduler) Source() adapters.Source {
	u := s.opts.Unattended
	if u == nil {
		u = func(chatID string) *permissions.Unattended {
			jobID, _, _ := ParseChatID(chatID)
			return &permissions.Unattended{What: fmt.Sprintf("cron job %q", jobID), Key: "allow_tools on the job in the config"}
		}
	}
	return adapters.Source{Name: "cron", Replies: adapters.RepliesReported, Asks: adapters.AskPolicy, Unattended: u,
		Started: func() []any { return []any{"jobs", s.opts.Jobs()} }}
}

// New returns a scheduler; Start runs it.
func New(opts Options) (*Scheduler, error) {
	if opts.Store == nil {
		return nil, errors.New("cron: no store")
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.ID == "" {
		opts.ID = DefaultID
	}
	if opts.Jobs == nil {
		opts.Jobs = func() int { return 0 }
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{opts: opts, store: opts.Store, clock: opts.Clock, log: opts.Log,
		kick: make(chan struct{}, 1), running: map[string]Run{}, jobs: map[string]*entry{}}, nil
}

// Store is the scheduler's store.
func (s *Scheduler) Store() *Store { return s.store }

// Reload makes the running scheduler read the job list again now, rather
// than at its next poll: call it after adding or removing a job in this
// process.
func (s *Scheduler) Reload() {
	s.reload.Store(true)
	s.wake()
}

func (s *Scheduler) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Start runs the schedule until ctx ends, delivering each fire to sink.
// First it settles what an earlier run of the process left: runs still
// open are delivered again (the gateway drops a message it has) or, past
// their timeout, recorded as timed out; then each job's most recent fire
// missed while parley was down runs, if catch_up covers it, or is recorded
// as skipped.
func (s *Scheduler) Start(ctx context.Context, sink adapters.Sink) error {
	s.mu.Lock()
	if s.sink != nil {
		s.mu.Unlock()
		return errors.New("cron: scheduler started twice")
	}
	s.sink = sink
	s.running = map[string]Run{} // recoverRuns fills it from the database
	s.mu.Unlock()
	s.jobs = map[string]*entry{}
	defer func() {
		s.mu.Lock()
		s.sink = nil
		s.mu.Unlock()
	}()

	defer s.withdrawConfig(ctx)

	now := s.clock.Now()
	if err := s.recoverRuns(ctx, now); err != nil {
		return err
	}
	polled, err := s.poll(ctx, now)
	if err != nil {
		return err
	}
	nextPoll, nextRenew := now.Add(s.opts.Poll), now
	for {
		now = s.clock.Now()
		if s.store.renews() && !now.Before(nextRenew) {
			s.renewConfig(ctx)
			nextRenew = now.Add(min(s.opts.Poll, ConfigLease/3))
		}
		if reload := s.reload.Swap(false); reload || !now.Before(nextPoll) {
			if reload || !s.store.db.Unchanged(polled) {
				if polled, err = s.poll(ctx, now); err != nil && ctx.Err() == nil {
					s.log.WarnContext(ctx, "read cron jobs", "error", err)
				}
			}
			nextPoll = now.Add(s.opts.Poll)
		}
		s.expire(ctx, now)
		s.fireDue(ctx, now)
		wake := s.nextWake(nextPoll)
		if s.store.renews() && nextRenew.Before(wake) {
			wake = nextRenew
		}
		timer, stop := s.clock.At(wake)
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-timer:
		case <-s.kick:
		}
		stop()
	}
}

// renewConfig renews this process's declaration of its config's jobs, and
// drops the config jobs no running replica's config has any more.
func (s *Scheduler) renewConfig(ctx context.Context) {
	removed, err := s.store.renewConfig(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "renew the config's cron jobs", "error", err)
		}
		return
	}
	for _, id := range removed {
		s.log.InfoContext(ctx, "cron job removed: no running replica's config has it any more", "job_id", id)
	}
	if len(removed) > 0 {
		s.reload.Store(true)
	}
}

// withdrawConfig withdraws this process's declaration of its config's jobs
// as the scheduler stops, so a replica whose config lacks one of them can
// remove it without waiting for the declaration to lapse.
func (s *Scheduler) withdrawConfig(ctx context.Context) {
	if !s.store.declares() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	removed, err := s.store.withdrawConfig(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "withdraw the config's cron jobs; they are kept until the declaration lapses", "error", err, "lease", ConfigLease)
	}
	for _, id := range removed {
		s.log.InfoContext(ctx, "cron job removed: no running replica's config has it any more", "job_id", id)
	}
}

// nextWake is the earliest of the next poll, the next fire and the next
// deadline of a running fire.
func (s *Scheduler) nextWake(nextPoll time.Time) time.Time {
	wake := nextPoll
	for _, e := range s.jobs {
		if !e.next.IsZero() && e.next.Before(wake) {
			wake = e.next
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.running {
		if r.DeadlineAt.Before(wake) {
			wake = r.DeadlineAt
		}
	}
	return wake
}

// loadJobs reads the enabled jobs. A job seen for the first time (at start,
// or added since) gets its most recent missed fire since its last receipt
// or its creation handled; a changed one is rescheduled from now.
func (s *Scheduler) loadJobs(ctx context.Context, now time.Time) error {
	jobs, err := s.store.List(ctx)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		if !j.Enabled() {
			continue
		}
		seen[j.ID] = true
		old, known := s.jobs[j.ID]
		if known && old.job.UpdatedAt.Equal(j.UpdatedAt) {
			continue
		}
		sched, err := j.ParsedSchedule()
		if err != nil {
			s.log.ErrorContext(ctx, "cron job not scheduled", "job_id", j.ID, "error", err)
			delete(s.jobs, j.ID)
			continue
		}
		e := &entry{job: j, sched: sched}
		s.jobs[j.ID] = e
		if !known {
			s.catchUp(ctx, e, now)
		}
		e.next = sched.Next(now)
	}
	for id := range s.jobs {
		if !seen[id] {
			delete(s.jobs, id)
		}
	}
	return nil
}

// catchUp handles a job's most recent fire between its last receipt (or
// its creation) and now, which nobody ran: parley was down. Only the most
// recent miss gets a receipt: after a long downtime, one skipped receipt
// per missed fire would flood the receipts and say nothing more.
func (s *Scheduler) catchUp(ctx context.Context, e *entry, now time.Time) {
	ref, err := s.store.lastScheduled(ctx, e.job.ID)
	if err != nil {
		s.log.ErrorContext(ctx, "cron catch-up check", "job_id", e.job.ID, "error", err)
		return
	}
	if ref.Before(e.job.CreatedAt) {
		ref = e.job.CreatedAt
	}
	if at, ok := e.sched.lastBefore(ref, now); ok {
		s.fire(ctx, e.job, at, now)
	}
}

// fireDue fires each job whose time has come. If the loop woke late past
// several fire times (a suspended machine), only the latest is handled.
func (s *Scheduler) fireDue(ctx context.Context, now time.Time) {
	for _, e := range s.jobs {
		if e.next.IsZero() || e.next.After(now) {
			continue
		}
		at := e.next
		if last, ok := e.sched.lastBefore(at.Add(-time.Nanosecond), now); ok {
			at = last
		}
		s.fire(ctx, e.job, at, now)
		e.next = e.sched.Next(now)
	}
}

// fire runs the fire of j scheduled at at, if it isn't too late for it.
func (s *Scheduler) fire(ctx context.Context, j Job, at, now time.Time) {
	kind := KindSchedule
	if late := now.Sub(at); late > s.opts.Grace {
		if j.CatchUp <= 0 || late > j.CatchUp {
			why := fmt.Sprintf("missed: parley was not running (or the machine slept) at the scheduled time, %s ago", late.Round(time.Second))
			if j.CatchUp > 0 {
				why += fmt.Sprintf("; catch_up is %s", j.CatchUp)
			} else {
				why += "; catch_up is off"
			}
			_, err := s.store.insertRun(ctx, s.store.db.Write(), j, at, KindSchedule, StatusSkipped, now, why)
			if err != nil && !errors.Is(err, errFireTaken) {
				s.log.ErrorContext(ctx, "record a missed cron fire", "job_id", j.ID, "error", err)
			} else if err == nil {
				s.log.InfoContext(ctx, "cron fire missed", "job_id", j.ID, "scheduled_at", at, "late", late)
			}
			return
		}
		kind = KindCatchUp
	}
	r, err := s.store.begin(ctx, j, at, kind, now)
	switch {
	case errors.Is(err, errFireTaken):
		s.log.DebugContext(ctx, "cron fire already recorded", "job_id", j.ID, "scheduled_at", at)
		return
	case errors.Is(err, errJobChanged):
		s.log.InfoContext(ctx, "cron fire not run: the job changed or was removed since this replica read it; reading the jobs again", "job_id", j.ID, "scheduled_at", at)
		s.Reload()
		return
	case err != nil:
		s.log.ErrorContext(ctx, "record a cron fire", "job_id", j.ID, "error", err)
		return
	case r.Status == StatusSkipped:
		s.log.InfoContext(ctx, "cron fire skipped", "job_id", j.ID, "reason", r.Error)
		return
	}
	s.start(ctx, j, r)
}

// start delivers a started run's prompt to the gateway.
func (s *Scheduler) start(ctx context.Context, j Job, r Run) {
	s.mu.Lock()
	sink := s.sink
	s.running[r.ID] = r
	s.mu.Unlock()
	if sink == nil {
		return // stopping: the next start delivers it again
	}
	ctx, span := s.opts.Tracer.Root(ctx, telemetry.Parent{}, telemetry.SpanCronFire, telemetry.KindProducer, time.Time{})
	defer span.End()
	span.Str("parley.cron.job", j.ID)
	span.Str("parley.cron.run", r.ID)
	in := adapters.Inbound{
		Adapter: s.opts.ID, Surface: sessions.SurfaceCron, ChatID: r.ChatID(), UserID: "cron",
		DisplayName: "scheduled job " + j.ID, Group: true, AgentID: r.AgentID,
		// Stable for the fire, so the gateway drops a repeat delivery.
		MessageID: r.ChatID(), Text: j.Prompt, Time: r.ScheduledAt,
	}
	if err := sink.Deliver(ctx, in); err != nil {
		span.Fail(err)
		if ctx.Err() != nil {
			return // stopping: the next start delivers it again
		}
		s.log.ErrorContext(ctx, "deliver a cron fire", "job_id", j.ID, "run_id", r.ID, "error", err)
		if _, err := s.end(ctx, r, StatusError, "deliver to the gateway: "+err.Error(), "", ""); err != nil {
			s.log.ErrorContext(ctx, "record a failed cron fire", "job_id", j.ID, "run_id", r.ID, "error", err)
		}
		return
	}
	s.log.InfoContext(ctx, "cron job fired", "job_id", j.ID, "run_id", r.ID, "session_key", r.SessionKey().String(), "kind", r.Kind)
}

// expire ends the runs past their deadline as timed out.
func (s *Scheduler) expire(ctx context.Context, now time.Time) {
	var due []Run
	s.mu.Lock()
	for _, r := range s.running {
		if !r.DeadlineAt.After(now) {
			due = append(due, r)
		}
	}
	s.mu.Unlock()
	for _, r := range due {
		why := fmt.Sprintf("did not finish within its timeout (%s); stopped", r.DeadlineAt.Sub(r.StartedAt))
		if _, err := s.end(ctx, r, StatusTimeout, why, "", ""); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "end a timed-out cron run", "job_id", r.JobID, "run_id", r.ID, "error", err)
		}
	}
}

// recoverRuns settles the runs an earlier run of the process left open.
func (s *Scheduler) recoverRuns(ctx context.Context, now time.Time) error {
	runs, err := s.store.openRuns(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Status != StatusStarted {
			continue // queued: startQueued takes it
		}
		if !r.DeadlineAt.After(now) {
			if _, err := s.end(ctx, r, StatusTimeout, "parley stopped while it ran, and its timeout passed before parley started again", "", ""); err != nil {
				return err
			}
			continue
		}
		j, err := s.store.Job(ctx, r.JobID)
		if errors.Is(err, ErrNotFound) {
			if _, err := s.end(ctx, r, StatusError, "the job was removed while it ran", "", ""); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		// The gateway may have it already (then this is dropped as a
		// duplicate) or may never have got it (a crash between the
		// receipt and the delivery).
		s.start(ctx, j, r)
	}
	return nil
}

// poll reads the jobs and starts the queued manual runs. It returns the
// database's mark from before the read: on a SQLite file this process
// holds, a later poll with nothing written since has nothing new to read,
// and an idle daemon leaves the file alone. After a failure the mark is
// NoMark, so the next poll tries again.
func (s *Scheduler) poll(ctx context.Context, now time.Time) (dbutil.Mark, error) {
	mark := s.store.db.Mark()
	if err := s.loadJobs(ctx, now); err != nil {
		return dbutil.NoMark, err
	}
	if !s.startQueued(ctx, now) {
		return dbutil.NoMark, nil
	}
	return mark, nil
}

// startQueued starts the manual runs Store.RequestRun queued; ok is false
// when one could not be started, to be tried again at the next poll.
func (s *Scheduler) startQueued(ctx context.Context, now time.Time) (ok bool) {
	ok = true
	runs, err := s.store.openRuns(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "read queued cron runs", "error", err)
		}
		return false
	}
	for _, r := range runs {
		if r.Status != StatusQueued {
			continue
		}
		j, err := s.store.Job(ctx, r.JobID)
		if errors.Is(err, ErrNotFound) {
			if _, err := s.end(ctx, r, StatusError, "the job was removed before its run started", "", ""); err != nil {
				s.log.ErrorContext(ctx, "end a queued cron run", "job_id", r.JobID, "run_id", r.ID, "error", err)
			}
			continue
		}
		if err != nil {
			s.log.ErrorContext(ctx, "start a queued cron run", "job_id", r.JobID, "run_id", r.ID, "error", err)
			ok = false
			continue
		}
		r, claimed, err := s.store.claim(ctx, r, j, now)
		switch {
		case err != nil:
			s.log.ErrorContext(ctx, "start a queued cron run", "job_id", r.JobID, "run_id", r.ID, "error", err)
			ok = false
		case claimed && r.Status == StatusStarted:
			s.start(ctx, j, r)
		case claimed:
			s.log.InfoContext(ctx, "manual cron run skipped", "job_id", j.ID, "reason", r.Error)
		}
	}
	return ok
}

// RunNow fires a job at once (`parley cron run ID` in the daemon's
// process, or the API). The returned receipt is started, or skipped while
// the job's previous fire still runs. A disabled job runs too.
func (s *Scheduler) RunNow(ctx context.Context, id string) (Run, error) {
	s.mu.Lock()
	running := s.sink != nil
	s.mu.Unlock()
	if !running {
		return Run{}, fmt.Errorf("%w: start it first, or queue the run with Store.RequestRun", ErrNotRunning)
	}
	j, err := s.store.Job(ctx, id)
	if err != nil {
		return Run{}, err
	}
	now := s.clock.Now()
	r, err := manualAt(id, now, func(at time.Time) (Run, error) { return s.store.begin(ctx, j, at, KindManual, now) })
	if err != nil {
		return Run{}, err
	}
	if r.Status == StatusStarted {
		s.start(ctx, j, r)
		s.wake() // its deadline may be the next thing to wait for
	}
	return r, nil
}

// Running lists the runs this process started that haven't ended.
func (s *Scheduler) Running() []Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Run, 0, len(s.running))
	for _, r := range s.running {
		out = append(out, r)
	}
	return out
}
