// Package agent runs the LLM turn loop for a session: prompt assembly,
// streaming model calls, tool calls, the step cap, the doom-loop guard,
// retries with a visible status, abort, and persistence as each message lands.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/parleyd/parley/clienttools"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// Events the runner publishes, with SessionID set.
const (
	EventTurnStarted   events.Type = "turn.started"   // Data: TurnStarted
	EventMessageDelta  events.Type = "message.delta"  // Data: string, the text delta
	EventToolStarted   events.Type = "tool.started"   // Data: ToolEvent
	EventToolCompleted events.Type = "tool.completed" // Data: ToolEvent
	EventToolRetrying  events.Type = "tool.retrying"  // Data: ToolEvent, with Retry
	EventTurnFinished  events.Type = "turn.finished"  // Data: TurnFinished
	// EventTurnJoined says that inputs with run ids joined the turn in
	// progress (steering).
	EventTurnJoined events.Type = "turn.joined" // Data: TurnJoined
	// EventModelFallback: the agent's model failed (past its retries) and
	// a fallback model answers the call.
	EventModelFallback events.Type = "model.fallback" // Data: ModelFallback
)

const (
	// MaxParallelTools caps the tool calls of one step running at once.
	MaxParallelTools = 10
)

// TurnStarted is the data of a turn.started event.
type TurnStarted struct {
	AgentID string
	Model   string
	// RunIDs are the run ids of the turn's inputs (Input.RunID), in order.
	RunIDs []string
}

// ModelFallback is the data of a model.fallback event.
type ModelFallback struct {
	AgentID  string
	Model    string // the spec that failed
	Fallback string // the spec that answers instead
}

// TurnJoined is the data of a turn.joined event.
type TurnJoined struct {
	RunIDs []string
}

// ToolEvent is the data of tool.started and tool.completed events.
type ToolEvent struct {
	CallID string
	Name   string
	// Result and IsError are set on tool.completed, and Attempts when
	// the tool's retry policy tried it more than once.
	Result   string
	IsError  bool
	Attempts int
	// Retry is set on tool.retrying: the try that failed, and the wait
	// before the next.
	Retry *tools.Attempt
	Wait  time.Duration
}

// TurnFinished is the data of a turn.finished event.
type TurnFinished struct {
	// RunIDs are the run ids of the turn's inputs, as on turn.started
	// (which a turn that fails before it starts never publishes), and of
	// those that joined it.
	RunIDs  []string
	Steps   int
	Usage   llm.Usage
	Aborted bool
	// Error is the run's error text, if it failed.
	Error string
	// Reply is the run's reply as stored: the last assistant message with
	// text it appended (nil if it wrote none). Reply callbacks are keyed
	// to it.
	Reply *sessions.Message
}

// IsReply reports whether m is a reply a person reads as it is appended:
// an assistant message with text and no tool calls, outside a side turn
// (a memory flush). A run's reply is the last such message it appends,
// except that a run stopped during a tool call replies with that call's
// text (TurnFinished.Reply says which).
func IsReply(m sessions.Message) bool {
	return m.Role == sessions.RoleAssistant && len(m.ToolCalls) == 0 && strings.TrimSpace(m.Content) != "" && !sideTurn(m)
}

func sideTurn(m sessions.Message) bool {
	for _, p := range m.Parts {
		if p.Type == PartSideTurn {
			return true
		}
	}
	return false
}

// replyOf is the last assistant message with text among msgs, or nil.
func replyOf(msgs []sessions.Message) *sessions.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i]; m.Role == sessions.RoleAssistant && strings.TrimSpace(m.Content) != "" && !sideTurn(m) {
			return &m
		}
	}
	return nil
}

// Options configures a Runner.
type Options struct {
	Store sessions.Store
	// Admit, if set, may refuse a turn before a model is called (a spend
	// cap reached): its error ends the turn. A *RefusedError's text is
	// what the person is told.
	Admit func(ctx context.Context, s sessions.Session) error
	// Models opens a model from a spec like "echo" or "openai/gpt-4o-mini".
	Models       func(spec string) (llm.Model, error)
	DefaultModel string
	Tools        *tools.Registry
	Bus          *events.Bus
	Log          *slog.Logger
	Now          func() time.Time
	Retry        llm.RetryPolicy
	// Compactor, if set, compacts a session before a turn whose context
	// reaches the agent's threshold and after a turn that left it there;
	// nil means no compaction.
	Compactor Compactor
	// ContextWindow, if set, gives the context window of a model spec other
	// than the agent's own (a per-message or per-session override); 0 means
	// unknown. The known-models table (KnownContextWindow), then the agent's
	// MaxContextTokens, stand in.
	ContextWindow func(spec string) int
	// StoreRetry is the longest wait between tries of a turn the database
	// failed under (it was unavailable); default 2s.
	StoreRetry time.Duration
	// ClientTools, if set, offers an API session's agent the tools its
	// client declared, and carries their calls to the client.
	ClientTools *clienttools.Hub
	// StoredFile, if set, reads a file of a session's file store: the
	// images kept with earlier messages, shown again to a vision model.
	StoredFile func(ctx context.Context, session sessions.ID, name string) (data []byte, mediaType string, err error)
}

// AgentConfig is what the runner needs to know about the agent.
type AgentConfig struct {
	ID           string
	Prompt       string
	WorkspaceDir string
	Model        string
	// MaxSteps caps model calls per run; 0 means config.DefaultMaxSteps.
	MaxSteps int
	// HistoryTurns caps the user turns sent; 0 means the session kind's
	// default (sessions.DefaultHistoryTurns).
	HistoryTurns int
	// OmitToolResults names tools (exactly, or by a pattern with * and ?)
	// whose results earlier turns got are left out of the prompt: each is
	// replaced by a line saying so. The current turn's own are kept.
	OmitToolResults []string
	Location        *time.Location
	// Minimal selects the minimal prompt mode; cron and webhook sessions
	// always use it.
	Minimal bool
	// SkillIndex, if set, is the prompt's skill index as it is; else the
	// skills found in SkillDirs (skills.Load, read each turn) are listed
	// there, and the skill tool is offered to load them.
	SkillIndex      string
	SkillDirs       []string
	Tools           []string
	MaxOutputTokens int
	// MaxContextTokens is the context window of the agent's own model; 0
	// means unknown, and then nothing is compacted or pruned automatically.
	MaxContextTokens int
	Compaction       CompactionConfig
	// FallbackModels answer, in order, when Model fails in a way another
	// model may not (a 5xx, an overload, a timeout): the stored message
	// and the status say which answered.
	FallbackModels []string
	// ReasoningEffort ("low", "medium", "high") asks reasoning models to
	// think more or less; "" leaves the provider's default.
	ReasoningEffort string
	// Timeouts override, field by field, the provider's deadlines for
	// this agent's model calls (llm.WithCallTimeouts); zero keeps them.
	Timeouts llm.Timeouts
	// Vision says the model sees images: those kept with earlier
	// messages (FileData.Stored) are shown again, newest first, after
	// the run's own, within MaxImages and MaxImageBytes.
	Vision bool
	// MaxImages caps the images of one prompt (the run's own included);
	// 0 means config.DefaultMaxImagesPerTurn.
	MaxImages int
	// MaxImageBytes caps the bytes of earlier messages' images added to a
	// prompt; 0 adds none.
	MaxImageBytes int
}

// Input is one user message for a run.
type Input struct {
	// ID, when set, makes the message idempotent: a run retried after a
	// crash stores it once (any UUID, e.g. the inbound record's id).
	ID          sessions.MessageID
	Text        string
	DisplayName string
	// Model overrides the model spec for this run.
	Model string
	// ReasoningEffort overrides the agent's for this run.
	ReasoningEffort string
	Synthetic       bool
	// Parts are stored with the message: files sent with it
	// (sessions.FilePart), which the model reads as a line each, with
	// the text parley read of them.
	Parts []sessions.Part
	// Images go to the model with this message, in this run only: the
	// stored message keeps the text, so later prompts don't resend them.
	Images []llm.Image
	// RunID, when set, is the id a caller was given for the run that
	// answers this input (the API's run id). The turn's events carry it:
	// inputs answered together (debounce, collect, steer) are one run
	// under several ids.
	RunID string
}

// runIDs are the inputs' run ids, in order.
func runIDs(inputs []Input) []string {
	var ids []string
	for _, in := range inputs {
		if in.RunID != "" {
			ids = append(ids, in.RunID)
		}
	}
	return ids
}

// Request is one run of an agent in a session.
type Request struct {
	Session sessions.Session
	Agent   AgentConfig
	Inputs  []Input
	// Steer, if set, is asked at each step boundary for messages that
	// arrived meanwhile; they join the run as user messages.
	Steer func() []Input
	// DeferCompaction skips the after-turn compaction check, so the reply
	// is not held up by it; the caller then calls Runner.AfterTurn once the
	// reply is on its way, on the session's lane.
	DeferCompaction bool
	// OnText, if set, takes the reply's text as the model writes it, for a
	// channel that shows replies as they stream. It must not block.
	OnText func(delta string)
	// OnStatus, if set, hears the turn's status as it changes while the
	// reply waits (the model tried again, the conversation compacted),
	// for a channel that shows it. It must not block.
	OnStatus func(Status)
	// Finish, if set (with DeferCompaction, so the result is final), runs
	// in the transaction that stores the turn's reply (its last assistant
	// message, which calls no tools), given the result as the run returns
	// it: the caller records there what the reply answered, so the reply
	// and that record commit together, in one durable write. Its error
	// fails the append, and the run. Result.Finished says it committed.
	Finish func(ctx context.Context, q dbutil.Querier, res Result) error
	// Asker asks the person the turn answers when a permission rule says
	// a tool call must be asked about; nil means nobody can be asked, and
	// such a call is denied (unless Unattended allows it).
	Asker Asker
	// User is who the turn answers, "<surface>:<user id>": in a group, the
	// person who addressed the bot. Their "always" answers apply, and only
	// they may answer its questions. Empty: the session's own user.
	User string
	// Unattended, for a run nobody watches (a cron job, a webhook), says
	// which tools its config allows without asking.
	Unattended *permissions.Unattended

	// inherited is a subagent's parent turn's origin: the child's
	// questions go to the same person, through the parent.
	inherited *permissions.Origin
}

// Result is what a run produced.
type Result struct {
	// Reply is the final assistant text.
	Reply string
	// Messages are the messages appended by this run, in order.
	Messages []sessions.Message
	Usage    llm.Usage
	Steps    int
	Aborted  bool
	// Notices are one-line notices for the user, such as "summarized 24
	// earlier messages" when compaction ran and the agent asks to be told.
	Notices []string
	// Finished: Request.Finish committed with the reply.
	Finished bool
}

// Runner runs agent turns. One run per session at a time.
type Runner struct {
	opts     Options
	log      *slog.Logger
	now      func() time.Time
	statuses Statuses

	mu      sync.Mutex
	running map[sessions.ID]context.CancelFunc
	// warned holds the problems logged once (a broken skill).
	warned sync.Map
	// rendered remembers the prompt text of user messages with files.
	rendered renderCache
}

// New returns a Runner.
func New(opts Options) *Runner {
	r := &Runner{opts: opts, log: opts.Log, now: opts.Now, running: map[sessions.ID]context.CancelFunc{}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// Statuses is the runner's status board.
func (r *Runner) Statuses() *Statuses { return &r.statuses }

// Status returns a session's status.
func (r *Runner) Status(id sessions.ID) Status { return r.statuses.Get(id) }

// Abort cancels the session's running turn, if any, and reports whether
// there was one.
func (r *Runner) Abort(id sessions.ID) bool {
	r.mu.Lock()
	cancel, ok := r.running[id]
	r.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// Run runs one turn: it persists the inputs, then calls the model and tools
// until the model answers without tool calls or the step cap is hit. It
// returns ErrBusy if the session already runs here. An abort returns the
// partial Result with Aborted set and an error wrapping ctx.Err().
func (r *Runner) Run(ctx context.Context, req Request) (Result, error) {
	id := req.Session.ID
	ctx, release, err := r.acquire(ctx, id)
	if err != nil {
		return Result{}, err
	}
	defer release()

	var (
		res Result
		t   *turn
	)
	// A try the database failed under (it was unavailable) is tried again
	// once it answers, within this run: the session's lane keeps its place,
	// the run's events go on, and /stop ends the wait.
	for tries := 1; ; tries++ {
		if tries > 1 {
			var done bool
			if res, done, err = r.resume(ctx, req); done && err == nil {
				return res, nil
			}
		}
		if err == nil {
			r.statuses.set(id, Status{State: StateBusy, StartedAt: r.now()})
			t = &turn{r: r, req: req, id: id, pctx: context.WithoutCancel(ctx)}
			res, err = t.run(ctx)
		}
		if !dbutil.Unavailable(err) || res.Aborted {
			break
		}
		r.statuses.set(id, Status{State: StateRetrying, Attempt: tries,
			Message: "the database is unavailable; the turn runs again once it answers"})
		r.log.WarnContext(ctx, "a turn met an unavailable database; it runs again once it answers", "session_id", id, "tries", tries, "error", err)
		if !r.waitForStore(ctx, tries) {
			res.Aborted = true
			err = fmt.Errorf("turn in session %s aborted while the database was unavailable: %w", id, context.Cause(ctx))
			break
		}
		req.OnText = nil // what streamed is shown; the final edit gives the whole reply
	}
	// One compaction per run: a turn that tried before it doesn't try again.
	if err == nil && !res.Aborted && !req.DeferCompaction && t != nil && !t.compacted && r.opts.Compactor != nil {
		cr, cerr := r.afterTurn(ctx, req)
		switch {
		case cerr != nil && ctx.Err() == nil:
			// The reply stands; the next turn checks again.
			r.log.WarnContext(ctx, "compaction after the turn failed", "session_id", id, "error", cerr)
		case cr.Notice != "":
			res.Notices = append(res.Notices, cr.Notice)
		}
	}

	var joined []string
	if t != nil {
		joined = t.joined
	}
	fin := TurnFinished{RunIDs: append(runIDs(req.Inputs), joined...), Steps: res.Steps, Usage: res.Usage, Aborted: res.Aborted,
		Reply: replyOf(res.Messages)}
	switch {
	case err == nil || res.Aborted:
		r.statuses.set(id, Status{State: StateIdle})
	default:
		fin.Error = err.Error()
		r.statuses.set(id, Status{State: StateError, Message: err.Error()})
	}
	r.publish(id, EventTurnFinished, fin)
	return res, err
}

func (r *Runner) publish(id sessions.ID, typ events.Type, data any) {
	r.opts.Bus.Publish(events.Event{Type: typ, SessionID: string(id), At: r.now(), Data: data})
}

// model opens spec wrapped in retries that show on the status board.
func (r *Runner) model(id sessions.ID, spec string, onStatus func(Status)) (llm.Model, string, error) {
	if spec == "" {
		return nil, "", ErrNoModel
	}
	if r.opts.Models == nil {
		return nil, "", fmt.Errorf("open model %s: %w", spec, ErrNoModel)
	}
	_, name, err := llm.ParseModel(spec)
	if err != nil {
		return nil, "", fmt.Errorf("parse model %s: %w", spec, err)
	}
	m, err := r.opts.Models(spec)
	if err != nil {
		return nil, "", fmt.Errorf("open model %s: %w", spec, err)
	}
	policy := r.opts.Retry
	next := policy.OnRetry
	policy.OnRetry = func(ctx context.Context, attempt int, err error, wait time.Duration) {
		msg := retryMessage(err, attempt, wait)
		var st Status
		r.statuses.update(id, func(s *Status) {
			s.State, s.Attempt, s.Message = StateRetrying, attempt, msg
			st = *s
		})
		// The API's stream shows the retry as it shows a wait.
		r.publish(id, EventStatusChanged, st)
		if onStatus != nil {
			onStatus(st)
		}
		r.log.WarnContext(ctx, "model call retrying", "session_id", id, "model", spec, "attempt", attempt, "wait", wait, "error", err)
		if next != nil {
			next(ctx, attempt, err, wait)
		}
	}
	return llm.WithRetry(m, policy), name, nil
}

func retryMessage(err error, attempt int, wait time.Duration) string {
	// Chat users read this in /status: the provider's status code, or
	// that it couldn't be reached, never the error's text (hosts, ports).
	cause := "the provider couldn't be reached"
	var (
		se *llm.StatusError
		te *llm.TimeoutError
	)
	switch {
	case errors.As(err, &se):
		cause = fmt.Sprintf("provider returned %d", se.StatusCode)
	case errors.As(err, &te):
		cause = "the provider " + te.Wait()
	}
	return fmt.Sprintf("%s; retrying in %s (attempt %d)", cause, wait.Round(100*time.Millisecond), attempt)
}

// workspaceInstructions reads AGENTS.md fresh each run; a missing file is
// fine and any other error is logged and skipped.
func (r *Runner) workspaceInstructions(ctx context.Context, dir string) string {
	if dir == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(dir, InstructionsFile))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.log.WarnContext(ctx, "workspace instructions skipped", "dir", dir, "error", err)
		}
		return ""
	}
	return string(b)
}

// displayName is the latest display name among the inputs.
func displayName(inputs []Input) string {
	for i := len(inputs) - 1; i >= 0; i-- {
		if inputs[i].DisplayName != "" {
			return inputs[i].DisplayName
		}
	}
	return ""
}

func minimalMode(cfg AgentConfig, kind string) bool {
	return cfg.Minimal || kind == sessions.SurfaceCron || kind == sessions.SurfaceWebhook
}

func maxSteps(cfg AgentConfig) int { return cmp.Or(max(cfg.MaxSteps, 0), config.DefaultMaxSteps) }
