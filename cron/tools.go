package cron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/textcut"
	"github.com/parleyd/parley/tools"
)

// Tool names.
const (
	CreateToolName = "schedule_create"
	ListToolName   = "schedule_list"
	DeleteToolName = "schedule_delete"
)

// Defaults for ToolOptions.
const (
	DefaultMaxToolJobs     = 20
	DefaultMinToolInterval = 5 * time.Minute
	maxToolPromptRunes     = 4000
)

// ToolOptions configure the schedule_* tools.
type ToolOptions struct {
	// TargetFor is the chat a session's jobs notify by default: the
	// adapter and chat the session talks on. A session key has the surface
	// and chat but not the adapter instance, so the daemon supplies it
	// (from the message that started the turn, say). ok false: the session
	// has no chat to notify (the CLI), and a job made there records its
	// results only.
	TargetFor func(ctx context.Context, key sessions.Key) (t Target, ok bool)
	// MayNotify allows a job to notify a target other than the caller's own
	// chat. nil allows only the caller's own: a chat user can't make the
	// bot write into other chats.
	MayNotify func(ctx context.Context, key sessions.Key, t Target) bool
	// MaxJobs caps the jobs one owner may have. Default 20.
	MaxJobs int
	// MinInterval is the shortest time between two fires of a tool job.
	// Default 5m.
	MinInterval time.Duration
	// Timeout and CatchUp are given to tool jobs; defaults DefaultTimeout
	// and 0.
	Timeout time.Duration
	CatchUp time.Duration
}

var createSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "schedule": {"type": "string", "minLength": 1, "maxLength": 200,
      "description": "When to run: 5 cron fields (minute hour day-of-month month day-of-week) such as \"0 9 * * 1-5\" for 9:00 on weekdays, or a descriptor such as \"@daily\" or \"@every 2h\"."},
    "prompt": {"type": "string", "minLength": 1, "maxLength": %d,
      "description": "What to do at each run, written as an instruction that makes sense on its own later, e.g. \"Summarize today's weather in Berlin.\""},
    "timezone": {"type": "string", "maxLength": 64,
      "description": "IANA time zone of the schedule, such as \"Europe/Berlin\"; default the server's."},
    "notify": {"type": "array", "maxItems": %d, "items": {"type": "string", "minLength": 3, "maxLength": 200},
      "description": "Chats to send each result to, as \"<adapter id>:<chat id>\"; default this chat. An empty list only records the results."}
  },
  "required": ["schedule", "prompt"],
  "additionalProperties": false
}`, maxToolPromptRunes, MaxNotify))

// createArgs are schedule_create's arguments (createSchema).
type createArgs struct {
	Schedule *string  `json:"schedule"`
	Prompt   *string  `json:"prompt"`
	Timezone string   `json:"timezone"`
	Notify   []string `json:"notify"`
}

var listSchema = json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`)

var deleteSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "id": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The job's id, as schedule_list shows it."}
  },
  "required": ["id"],
  "additionalProperties": false
}`)

// deleteArgs are schedule_delete's arguments (deleteSchema).
type deleteArgs struct {
	ID *string `json:"id"`
}

// Tools returns schedule_create, schedule_list and schedule_delete. Each
// acts for the calling session's owner (OwnerOf(call.Key)): jobs it makes
// belong to that user (or group chat), and it lists and deletes only those.
func (s *Scheduler) Tools(opts ToolOptions) []tools.Tool {
	if opts.MaxJobs <= 0 {
		opts.MaxJobs = DefaultMaxToolJobs
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultMinToolInterval
	}
	t := scheduleTools{s: s, opts: opts}
	return []tools.Tool{
		{Name: CreateToolName, Schema: createSchema,
			Run: tools.Decoded(CreateToolName, `{"schedule": "0 9 * * *", "prompt": "...", "timezone": "Europe/Berlin"}`, t.create),
			Description: "Schedule a recurring task for this user: at each time the schedule names, the agent is given the prompt " +
				"in a fresh conversation and the answer is sent to this chat (or the notify chats). Use it for reminders and regular reports."},
		{Name: ListToolName, Schema: listSchema, Run: tools.Decoded(ListToolName, "{}", t.list),
			Description: "List this user's scheduled tasks with their ids, schedules, next run and last result."},
		{Name: DeleteToolName, Schema: deleteSchema, Run: tools.Decoded(DeleteToolName, `{"id": "..."}`, t.delete),
			Description: "Delete one of this user's scheduled tasks by its id (see schedule_list)."},
	}
}

type scheduleTools struct {
	s    *Scheduler
	opts ToolOptions
}

// callerOwner is who a call acts for; parley's own sessions own nothing.
func callerOwner(tool string, k sessions.Key) (Owner, error) {
	switch k.Kind() {
	case sessions.SurfaceCron, sessions.SurfaceWebhook, sessions.SurfaceSubagent:
		return Owner{}, fmt.Errorf("%s: scheduled tasks can only be managed from a conversation with a user, not from a %s session", tool, k.Kind())
	}
	o := OwnerOf(k)
	if o.Surface == "" || o.SurfaceID == "" {
		return Owner{}, fmt.Errorf("%s: this session has no user to own a scheduled task", tool)
	}
	return o, nil
}

func (t scheduleTools) create(ctx context.Context, call tools.Call, args createArgs) (string, error) {
	owner, err := callerOwner(CreateToolName, call.Key)
	if err != nil {
		return "", err
	}
	if args.Schedule == nil || strings.TrimSpace(*args.Schedule) == "" {
		return "", fmt.Errorf("%s: schedule is required, such as \"0 9 * * *\" or \"@daily\"", CreateToolName)
	}
	if args.Prompt == nil || strings.TrimSpace(*args.Prompt) == "" {
		return "", fmt.Errorf("%s: prompt is required: what to do at each run", CreateToolName)
	}
	if n := utf8.RuneCountInString(*args.Prompt); n > maxToolPromptRunes {
		return "", fmt.Errorf("%s: prompt is %d characters; at most %d", CreateToolName, n, maxToolPromptRunes)
	}
	sched, err := ParseSchedule(*args.Schedule, args.Timezone)
	if err != nil {
		return "", fmt.Errorf("%s: %w", CreateToolName, err)
	}
	now := t.s.clock.Now()
	if gap := shortestGap(sched, now, 10); gap < t.opts.MinInterval {
		return "", fmt.Errorf("%s: %q runs every %s; scheduled tasks may run at most once every %s", CreateToolName, *args.Schedule, gap, t.opts.MinInterval)
	}

	own, hasOwn := Target{}, false
	if t.opts.TargetFor != nil {
		own, hasOwn = t.opts.TargetFor(ctx, call.Key)
	}
	var notify []Target
	if args.Notify == nil {
		if hasOwn {
			notify = []Target{own}
		}
	} else {
		notify, err = ParseTargets(args.Notify)
		if err != nil {
			return "", fmt.Errorf("%s: %w", CreateToolName, err)
		}
		for _, n := range notify {
			allowed := (hasOwn && n == own) || (t.opts.MayNotify != nil && t.opts.MayNotify(ctx, call.Key, n))
			if !allowed {
				return "", fmt.Errorf("%s: notify target %s is not allowed; leave notify out to send results to this chat", CreateToolName, n)
			}
		}
	}
	n, err := t.s.store.countOwned(ctx, owner)
	if err != nil {
		return "", t.storeError(ctx, CreateToolName, err)
	}
	if n >= t.opts.MaxJobs {
		return "", fmt.Errorf("%s: you have %d scheduled tasks, the most allowed; delete one with %s first", CreateToolName, n, DeleteToolName)
	}
	j, err := t.s.store.Add(ctx, Job{Schedule: *args.Schedule, Timezone: args.Timezone, AgentID: call.Key.AgentID,
		Prompt: *args.Prompt, Notify: notify, CatchUp: t.opts.CatchUp, Timeout: t.opts.Timeout, Owner: owner, Source: SourceTool})
	if err != nil {
		return "", t.storeError(ctx, CreateToolName, err)
	}
	t.s.Reload()
	var b strings.Builder
	fmt.Fprintf(&b, "Scheduled task %s created: %s", j.ID, describeSchedule(j, sched))
	if next := sched.Next(now); !next.IsZero() {
		fmt.Fprintf(&b, "; first run %s", next.In(sched.Location()).Format("Mon 2006-01-02 15:04 MST"))
	}
	switch {
	case len(notify) == 0:
		b.WriteString(". Results are recorded but not sent to any chat.")
	case len(notify) == 1 && hasOwn && notify[0] == own:
		b.WriteString(". Results will be sent to this chat.")
	default:
		fmt.Fprintf(&b, ". Results will be sent to %s.", joinTargets(notify))
	}
	return b.String(), nil
}

func (t scheduleTools) list(ctx context.Context, call tools.Call, _ struct{}) (string, error) {
	owner, err := callerOwner(ListToolName, call.Key)
	if err != nil {
		return "", err
	}
	jobs, err := t.s.store.Owned(ctx, owner)
	if err != nil {
		return "", t.storeError(ctx, ListToolName, err)
	}
	if len(jobs) == 0 {
		return "No scheduled tasks.", nil
	}
	now := t.s.clock.Now()
	var b strings.Builder
	fmt.Fprintf(&b, "%d scheduled task(s):\n", len(jobs))
	for _, j := range jobs {
		sched, err := j.ParsedSchedule()
		fmt.Fprintf(&b, "\n- %s: %s", j.ID, describeSchedule(j, sched))
		if err == nil && j.Enabled() {
			if next := sched.Next(now); !next.IsZero() {
				fmt.Fprintf(&b, "; next run %s", next.In(sched.Location()).Format("Mon 2006-01-02 15:04 MST"))
			}
		}
		if j.Disabled {
			b.WriteString(" (disabled)")
		}
		fmt.Fprintf(&b, "\n  prompt: %s", textcut.Runes(strings.Join(strings.Fields(j.Prompt), " "), 200, "…"))
		if len(j.Notify) > 0 {
			fmt.Fprintf(&b, "\n  sends results to: %s", joinTargets(j.Notify))
		}
		if runs, err := t.s.store.Runs(ctx, j.ID, 1); err == nil && len(runs) > 0 {
			r := runs[0]
			fmt.Fprintf(&b, "\n  last run: %s, %s", r.ScheduledAt.In(sched.Location()).Format("2006-01-02 15:04"), r.Status)
			if r.Error != "" {
				fmt.Fprintf(&b, " (%s)", firstLine(r.Error, 200))
			}
		}
	}
	return b.String(), nil
}

func (t scheduleTools) delete(ctx context.Context, call tools.Call, args deleteArgs) (string, error) {
	owner, err := callerOwner(DeleteToolName, call.Key)
	if err != nil {
		return "", err
	}
	if args.ID == nil || *args.ID == "" {
		return "", fmt.Errorf("%s: id is required; schedule_list shows the ids", DeleteToolName)
	}
	err = t.s.store.RemoveOwned(ctx, *args.ID, owner)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotOwner) {
		// The same answer either way: another user's job ids are not told.
		return "", fmt.Errorf("%s: you have no scheduled task %q; schedule_list shows yours", DeleteToolName, *args.ID)
	}
	if err != nil {
		return "", t.storeError(ctx, DeleteToolName, err)
	}
	t.s.Reload()
	return fmt.Sprintf("Scheduled task %s deleted.", *args.ID), nil
}

// storeError is what the model sees of a store error: bad input as it is,
// anything else logged here and told in short.
func (t scheduleTools) storeError(ctx context.Context, tool string, err error) error {
	if errors.Is(err, ErrInvalidJob) || errors.Is(err, ErrInvalidSchedule) || errors.Is(err, ErrInvalidTarget) {
		return fmt.Errorf("%s: %w", tool, err)
	}
	t.s.log.ErrorContext(ctx, "cron tool failed", "tool", tool, "error", err)
	return fmt.Errorf("%s: the schedule store failed; try again later", tool)
}

// shortestGap is the shortest time between the next n fires after now.
func shortestGap(s Schedule, now time.Time, n int) time.Duration {
	gap := time.Duration(1<<63 - 1)
	prev := s.Next(now)
	for range n {
		next := s.Next(prev)
		if prev.IsZero() || next.IsZero() {
			break
		}
		gap = min(gap, next.Sub(prev))
		prev = next
	}
	return gap
}

func describeSchedule(j Job, s Schedule) string {
	out := j.Schedule
	if j.Timezone != "" {
		out += " (" + j.Timezone + ")"
	} else if s.Location() == time.Local && !strings.HasPrefix(j.Schedule, "CRON_TZ=") && !strings.HasPrefix(j.Schedule, "TZ=") {
		out += " (server time)"
	}
	return out
}

func joinTargets(ts []Target) string {
	ss := make([]string, len(ts))
	for i, t := range ts {
		ss[i] = t.String()
	}
	return strings.Join(ss, ", ")
}
