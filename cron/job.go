package cron

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/commands"
	"github.com/parleyd/parley/internal/lazyregexp"
	"github.com/parleyd/parley/sessions"
)

// Defaults for a job that leaves them out.
const (
	// DefaultTimeout is how long a fire may run before it is stopped.
	DefaultTimeout = 5 * time.Minute
	// MaxPromptBytes caps a job's prompt: it becomes one inbound message.
	MaxPromptBytes = adapters.MaxTextBytes
	// MaxNotify caps a job's notify targets.
	MaxNotify = 20
)

// Source says where a job came from.
type Source string

const (
	// SourceConfig jobs are upserted from the config file on every start
	// and reload (the config wins), and removed once no running replica's
	// config has them (see SyncConfig).
	SourceConfig Source = "config"
	// SourceCLI jobs come from `parley cron add`.
	SourceCLI Source = "cli"
	// SourceTool jobs come from the schedule_create tool; they have an Owner.
	SourceTool Source = "tool"
)

// Job is one scheduled prompt.
type Job struct {
	// ID is letters, digits, '.', '_' and '-' (no ':', it is part of the
	// session key "cron:<id>:<ts>"). Store.Add generates one when empty.
	ID string
	// Schedule is 5 or 6 cron fields or a descriptor, optionally with a
	// "CRON_TZ=" prefix; see ParseSchedule.
	Schedule string
	// Timezone is an IANA zone for the schedule; "" is the server's local
	// time (or the schedule's own CRON_TZ= prefix).
	Timezone string
	// AgentID is the agent that answers the prompt.
	AgentID string
	Prompt  string
	// Notify are the chats the result goes to; none records it only.
	Notify []Target
	// Disabled jobs are stored but never fire. (Disabled rather than
	// Enabled, so a Job's zero value is enabled.)
	Disabled bool
	// CatchUp is how late a fire missed while parley was down (or while
	// the machine slept) may still run, once; 0 records the miss as skipped.
	CatchUp time.Duration
	// Timeout ends a fire that runs longer; 0 means DefaultTimeout.
	Timeout time.Duration
	// Owner is the session that created a tool job.
	Owner     Owner
	Source    Source
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Enabled reports whether the job fires.
func (j Job) Enabled() bool { return !j.Disabled }

// ParsedSchedule parses the job's schedule in its time zone, an @every
// schedule anchored at the job's creation (see Schedule.Anchored).
func (j Job) ParsedSchedule() (Schedule, error) {
	s, err := ParseSchedule(j.Schedule, j.Timezone)
	if err != nil {
		return Schedule{}, err
	}
	return s.Anchored(j.CreatedAt), nil
}

// EffectiveTimeout is Timeout, or DefaultTimeout when it is unset.
func (j Job) EffectiveTimeout() time.Duration {
	if j.Timeout <= 0 {
		return DefaultTimeout
	}
	return j.Timeout
}

var jobIDPattern = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidateID says what is wrong with a job id.
func ValidateID(id string) error {
	if !jobIDPattern.MatchString(id) {
		return fmt.Errorf("%w: id %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit (such as \"daily-report\")", ErrInvalidJob, id)
	}
	return nil
}

// Validate says what is wrong with a job, field by field, in words that
// say what to write instead. An empty ID is allowed (Store.Add fills it).
func (j Job) Validate() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if j.ID != "" {
		if err := ValidateID(j.ID); err != nil {
			add("%s", strings.TrimPrefix(err.Error(), ErrInvalidJob.Error()+": "))
		}
	}
	if _, err := j.ParsedSchedule(); err != nil {
		add("schedule: %v", err)
	}
	if strings.TrimSpace(j.AgentID) == "" {
		add("agent is required: the id of the agent that answers the prompt")
	}
	switch {
	case strings.TrimSpace(j.Prompt) == "":
		add("prompt is required: what the agent is asked at each fire")
	case len(j.Prompt) > MaxPromptBytes:
		add("prompt is %d bytes; at most %d", len(j.Prompt), MaxPromptBytes)
	case !utf8.ValidString(j.Prompt):
		add("prompt is not valid UTF-8")
	default:
		// (With a bot's name, /status@name, it is a prompt: the command is
		// another bot's.)
		if cmd, ok := commands.Parse(j.Prompt); ok && !strings.Contains(j.Prompt, "@") {
			add("prompt %q is the chat command /%s, which a fire would run instead of asking the agent, in a fresh session where it has nothing to act on; write the task in words", strings.TrimSpace(j.Prompt), cmd.Name)
		}
	}
	if len(j.Notify) > MaxNotify {
		add("notify has %d targets; at most %d", len(j.Notify), MaxNotify)
	}
	for i, t := range j.Notify {
		if err := t.Validate(); err != nil {
			add("notify[%d]: %v", i, err)
		}
	}
	if j.CatchUp < 0 {
		add("catch_up is %s; use a duration such as 1h, or 0 to skip missed fires", j.CatchUp)
	}
	if j.Timeout < 0 {
		add("timeout is %s; use a duration such as 5m", j.Timeout)
	}
	switch j.Source {
	case SourceConfig, SourceCLI, SourceTool:
	default:
		add("source %q: use config, cli or tool", j.Source)
	}
	if j.Source == SourceTool && j.Owner.IsZero() {
		add("a tool job needs an owner")
	}
	if len(problems) == 0 {
		return nil
	}
	name := j.ID
	if name == "" {
		name = "(new)"
	}
	return fmt.Errorf("%w %s: %s", ErrInvalidJob, name, strings.Join(problems, "; "))
}

// Target is a chat a job's result goes to: "<adapter id>:<chat id>", such
// as "tg-main:123456".
type Target struct {
	Adapter adapters.ID
	ChatID  string
}

// ParseTarget reads "<adapter id>:<chat id>". The adapter id is everything
// before the first ':', so a chat id may itself contain ':'.
func ParseTarget(s string) (Target, error) {
	a, chat, ok := strings.Cut(strings.TrimSpace(s), ":")
	t := Target{Adapter: adapters.ID(a), ChatID: chat}
	if !ok {
		return Target{}, fmt.Errorf("%w %q: write \"<adapter id>:<chat id>\", such as \"tg-main:123456\"", ErrInvalidTarget, s)
	}
	if err := t.Validate(); err != nil {
		return Target{}, err
	}
	return t, nil
}

// ParseTargets parses a list of targets, naming the first bad one.
func ParseTargets(ss []string) ([]Target, error) {
	out := make([]Target, 0, len(ss))
	for i, s := range ss {
		t, err := ParseTarget(s)
		if err != nil {
			return nil, fmt.Errorf("notify[%d]: %w", i, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Validate says what is wrong with a target.
func (t Target) Validate() error {
	switch {
	case t.Adapter == "" || t.ChatID == "":
		return fmt.Errorf("%w %q: both parts are needed: \"<adapter id>:<chat id>\", such as \"tg-main:123456\"", ErrInvalidTarget, t.String())
	case strings.ContainsAny(string(t.Adapter), " \t\n"):
		return fmt.Errorf("%w %q: the adapter id has a space; use the id from the config's adapters list", ErrInvalidTarget, t.String())
	}
	return nil
}

// String is "<adapter id>:<chat id>".
func (t Target) String() string { return string(t.Adapter) + ":" + t.ChatID }

// MarshalText writes the target as "<adapter id>:<chat id>".
func (t Target) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads "<adapter id>:<chat id>".
func (t *Target) UnmarshalText(b []byte) error {
	v, err := ParseTarget(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Owner is who created a tool job: the user of a direct conversation on a
// surface, or a group chat (UserID empty), as in a session key.
type Owner struct {
	UserID    string `json:"user_id,omitempty"`
	Surface   string `json:"surface,omitempty"`
	SurfaceID string `json:"surface_id,omitempty"`
}

// OwnerOf is the owner a session's tool calls act as: the key's user on its
// surface, or, in a group session, the group chat.
func OwnerOf(k sessions.Key) Owner {
	return Owner{UserID: k.UserID, Surface: k.Surface, SurfaceID: k.SurfaceID}
}

// IsZero reports whether there is no owner.
func (o Owner) IsZero() bool { return o == Owner{} }

// Owns reports whether a caller acting as c owns jobs owned by o: the same
// user on the same surface (from any chat), or the same group chat.
func (o Owner) Owns(c Owner) bool {
	if o.IsZero() || o.Surface != c.Surface || o.UserID != c.UserID {
		return false
	}
	return o.UserID != "" || o.SurfaceID == c.SurfaceID
}

// String names the owner for the CLI: "telegram:user:42" or
// "telegram:group:-100123".
func (o Owner) String() string {
	if o.IsZero() {
		return ""
	}
	if o.UserID == "" {
		return o.Surface + ":group:" + o.SurfaceID
	}
	return o.Surface + ":user:" + o.UserID
}

// Status is how a run ended, or where it stands.
type Status string

const (
	// StatusQueued: a manual run asked for with Store.RequestRun, waiting
	// for the running scheduler to pick it up.
	StatusQueued Status = "queued"
	// StatusStarted: delivered to the gateway; waiting for the reply.
	StatusStarted Status = "started"
	// StatusOK: the agent replied; Result holds the reply.
	StatusOK Status = "ok"
	// StatusError: the run failed; Error says why.
	StatusError Status = "error"
	// StatusSkipped: the fire did not run (the previous one still ran, or
	// it was missed while parley was down); Error says which.
	StatusSkipped Status = "skipped"
	// StatusTimeout: the run took longer than the job's timeout and was
	// stopped.
	StatusTimeout Status = "timeout"
)

// Finished reports whether the run has ended.
func (s Status) Finished() bool { return s != StatusQueued && s != StatusStarted }

// Kind says what started a run.
type Kind string

const (
	// KindSchedule: the schedule, on time.
	KindSchedule Kind = "schedule"
	// KindCatchUp: a fire missed while parley was down, run late because
	// the job's catch_up covers it.
	KindCatchUp Kind = "catch_up"
	// KindManual: RunNow or `parley cron run`.
	KindManual Kind = "manual"
)

// Run is one fire's receipt.
type Run struct {
	ID          string
	JobID       string
	AgentID     string
	Kind        Kind
	Status      Status
	ScheduledAt time.Time
	StartedAt   time.Time // zero for a skipped or queued run
	DeadlineAt  time.Time // StartedAt + the job's timeout
	EndedAt     time.Time // zero while it runs
	// NotifiedAt is when every notify target got the result (zero: not
	// yet, or nothing to send).
	NotifiedAt time.Time
	Error      string
	SessionID  sessions.ID
	// Result is the agent's reply, cut at MaxResultBytes.
	Result    string
	CreatedAt time.Time
	// NotifyError says why the result has not reached every notify target
	// yet (empty once it has, or while nothing went wrong).
	NotifyError string
}

// SessionKey is the run's session: "cron:<jobId>:<unix ms of ScheduledAt>".
func (r Run) SessionKey() sessions.Key { return sessions.CronKey(r.JobID, r.ScheduledAt, r.AgentID) }

// ChatID is the run's chat id in the gateway: "<jobId>:<unix ms>".
func (r Run) ChatID() string { return chatID(r.JobID, r.ScheduledAt) }

func chatID(jobID string, at time.Time) string { return fmt.Sprintf("%s:%d", jobID, at.UnixMilli()) }
