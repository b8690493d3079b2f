package cron

import "errors"

var (
	// ErrNotFound means no job (or run) has that id.
	ErrNotFound = errors.New("cron job not found")
	// ErrExists means a job with that id is already stored.
	ErrExists = errors.New("cron job already exists")
	// ErrInvalidJob means a job can't be stored as given; the wrapped
	// message says which field and what to write instead.
	ErrInvalidJob = errors.New("invalid cron job")
	// ErrInvalidSchedule means a schedule or time zone doesn't parse.
	ErrInvalidSchedule = errors.New("invalid schedule")
	// ErrInvalidTarget means a notify target isn't "<adapter id>:<chat id>".
	ErrInvalidTarget = errors.New("invalid notify target")
	// ErrConfigJob means the job comes from the config file: change or
	// remove it there, since the config wins on the next start.
	ErrConfigJob = errors.New("cron job comes from the config")
	// ErrNotOwner means the job belongs to someone else.
	ErrNotOwner = errors.New("cron job belongs to someone else")
	// ErrNotRunning means the scheduler hasn't started, so it can't fire a
	// job now; Store.RequestRun queues one for the running daemon instead.
	ErrNotRunning = errors.New("cron scheduler is not running")
	// ErrBusy means a manual run was requested for the same millisecond as
	// another run of the job.
	ErrBusy = errors.New("cron job already has a run at that time")
)
