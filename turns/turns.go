// Package turns is the bridge between the gateway and the agent: it runs
// each turn the gateway hands it (gateway.Runner), building the agent's
// request from the config, the turn's messages and their files and images,
// and deciding who answers its permission questions, as the message's
// source declares; then it compacts, answers /status and /compact, and
// retires a run's session once its one turn ended.
package turns

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/budgets"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/harness"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
)

// Options are what a Bridge runs turns with.
type Options struct {
	// Config is the config in force (a reload changes it).
	Config   func() *config.Config
	Runner   *agent.Runner
	Sessions *sessions.SQLStore
	MCP      *mcptools.Manager
	Caps     *budgets.Caps
	// Desk is where permission questions wait for their answer; Perms
	// says how long.
	Desk  *permissions.Desk
	Perms *permissions.Checker
	// Channel finds a running channel (or other source) by id.
	Channel func(id adapters.ID) (adapters.Adapter, bool)
	// Files is the session file store, where each message's files are
	// kept with it; nil keeps none.
	Files *files.Store
	// Gateway takes the API's messages and the channels' (Sink).
	Gateway *gateway.Gateway
	// AbortElsewhere stops the running turn of a session another replica
	// runs (a reset through this one's API); nil without replicas.
	AbortElsewhere func(ctx context.Context, key sessions.Key)
	// Harnesses resolve what sessions run on beyond their agent; nil:
	// nothing beyond it.
	Harnesses *harness.Set
	Log       *slog.Logger
}

// Bridge runs the gateway's turns through the agent.
type Bridge struct {
	o        Options
	runner   *agent.Runner
	sessions *sessions.SQLStore
	mcp      *mcptools.Manager
	desk     *permissions.Desk
	perms    *permissions.Checker
	log      *slog.Logger
	caps     adapters.CapabilityCache
}

var _ gateway.Runner = (*Bridge)(nil)

// New returns a bridge over o.
func New(o Options) *Bridge {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Bridge{o: o, runner: o.Runner, sessions: o.Sessions, mcp: o.MCP, desk: o.Desk, perms: o.Perms, log: o.Log}
}

// Attach gives the bridge the gateway it runs turns for, which is built
// with the bridge as its Runner.
func (b *Bridge) Attach(g *gateway.Gateway) { b.o.Gateway = g }

func (b *Bridge) cfg() *config.Config { return b.o.Config() }

func (b *Bridge) adapter(id adapters.ID) (adapters.Adapter, bool) { return b.o.Channel(id) }

// capabilities are what the channel called id can do.
func (b *Bridge) capabilities(id adapters.ID) adapters.Capabilities {
	ad, ok := b.adapter(id)
	if !ok {
		return adapters.Capabilities{}
	}
	return b.caps.Of(id, ad)
}

// Repair finalizes the tool calls a restart interrupted in a session.
func (b *Bridge) Repair(ctx context.Context, id sessions.ID) error {
	n, err := b.runner.RepairOrphans(ctx, id)
	if n > 0 {
		b.log.InfoContext(ctx, "finalized tool calls a restart interrupted", "session_id", id, "count", n)
	}
	return err
}

// Answered says whether a recovered message's turn stored its reply.
func (b *Bridge) Answered(ctx context.Context, s sessions.ID, id sessions.MessageID) (string, bool, error) {
	return b.runner.Answered(ctx, s, id)
}

// Run runs one agent turn for the gateway.
func (b *Bridge) Run(ctx context.Context, in gateway.TurnInput) (string, error) {
	req := b.request(ctx, in)
	a, _ := b.cfg().Agent(in.AgentID)
	// Each file is fetched once, kept in the session's file store with
	// its message, then read and shown from those bytes.
	ft := b.newFetch(ctx, in.Session.ID, in.Messages, in.IDs, in.Rerun)
	parts, fileNotices := b.turnFiles(ctx, a, ft)
	images, notices := b.turnImages(ctx, a, ft)
	notices = append(notices, fileNotices...)
	if in.Steer != nil {
		req.Steer = b.steerWithFiles(ctx, a, in.Session.ID, in.Steer)
	}
	for i := range req.Inputs {
		if i < len(images) {
			req.Inputs[i].Images = images[i]
		}
		if i < len(parts) {
			req.Inputs[i].Parts = parts[i]
		}
	}
	if !a.Vision {
		for i, m := range in.Messages {
			if n := countImages(m); n > 0 && i < len(req.Inputs) {
				req.Inputs[i].Text += fmt.Sprintf("\n[The user sent %d image(s), which this model can't see.]", n)
			}
		}
	}
	speak := b.speaks(a, in)
	if in.Finish != nil {
		// The reply's append records the turn's outcome, with the reply
		// text this returns.
		req.Finish = func(ctx context.Context, q dbutil.Querier, res agent.Result) error {
			attach(in, res)
			if speak && in.Speak != nil {
				in.Speak()
			}
			return in.Finish(ctx, q, replyText(append(notices, deniedNotes(req.Unattended)...), res))
		}
	}
	res, err := b.runner.Run(ctx, req)
	if err == nil {
		attach(in, res)
		if speak && in.Speak != nil {
			in.Speak()
		}
	}
	first := in.Messages[0]
	if ad, ok := b.adapter(first.Adapter); ok {
		if rec, ok := ad.(runRecorder); ok {
			// The run's receipt gets the session and the outcome, an empty
			// reply or a failure included, which never reach its source
			// otherwise, and the tool calls denied for want of a person.
			if ferr := rec.Finish(context.WithoutCancel(ctx), first.ChatID, in.Session.ID, withNotes(deniedNotes(req.Unattended), res.Reply), err); ferr != nil {
				b.log.WarnContext(ctx, "record a run's outcome", "source", first.Adapter, "chat_id", first.ChatID, "error", ferr)
			}
		}
	}
	return replyText(append(notices, deniedNotes(req.Unattended)...), res), err
}

// MetadataVoice is the session metadata key /voice sets: "on" or "off",
// over the agent's voice_replies.
const MetadataVoice = "voice"

// speaks says whether the turn's reply is spoken: the chat's /voice
// setting, else the agent's voice_replies ("when_spoken": the turn
// answers a voice note), and only with a speech provider.
func (b *Bridge) speaks(a config.Agent, in gateway.TurnInput) bool {
	if !b.cfg().Speech.Enabled() {
		return false
	}
	mode := a.VoiceReplies
	var meta map[string]any
	if json.Unmarshal(in.Session.Metadata, &meta) == nil {
		if v, ok := meta[MetadataVoice].(string); ok && (v == "on" || v == "off") {
			mode = v
		}
	}
	switch mode {
	case "on":
		return true
	case "when_spoken":
		for _, m := range in.Messages {
			for _, f := range m.Files {
				if adapters.IsSpeech(f) {
					return true
				}
			}
		}
	}
	return false
}

// attach gives the gateway the files the turn's reply carries (send_file).
func attach(in gateway.TurnInput, res agent.Result) {
	if in.Attach == nil {
		return
	}
	var out []adapters.OutFile
	for _, m := range res.Messages {
		out = append(out, files.Outgoing(m)...)
	}
	in.Attach(out)
}

// A runRecorder is a source that keeps a receipt of each run (cron): told
// every turn's outcome.
type runRecorder interface {
	Finish(ctx context.Context, chatID string, sessionID sessions.ID, reply string, runErr error) error
}

// replyText is a turn's reply as the chat gets it: the notices (the
// daemon's, then the run's) before the model's text.
func replyText(notices []string, res agent.Result) string {
	notices = append(notices[:len(notices):len(notices)], res.Notices...)
	if len(notices) > 0 && res.Reply != "" {
		return strings.Join(notices, "\n") + "\n\n" + res.Reply
	}
	return res.Reply
}

// request is the agent run for a gateway turn. Compaction after the turn
// is deferred to afterTurn, so it never holds up the reply.
func (b *Bridge) request(ctx context.Context, in gateway.TurnInput) agent.Request {
	a, _ := b.cfg().Agent(in.AgentID)
	inputs := make([]agent.Input, len(in.Messages))
	for i, m := range in.Messages {
		inputs[i] = agent.Input{Text: m.Attributed(), DisplayName: m.DisplayName, Model: m.Model, ReasoningEffort: m.ReasoningEffort, RunID: b.callerRunID(m)}
		if i < len(in.IDs) {
			// The inbound id (a UUID) doubles as the user message's id, so
			// a re-run after a crash does not store the message twice.
			inputs[i].ID = sessions.MessageID(in.IDs[i])
		}
	}
	req := agent.Request{Session: in.Session, Inputs: inputs, Agent: AgentConfig(a, in.Session.Key),
		OnText: in.OnText, DeferCompaction: true}
	req.Session = b.withHarness(ctx, in, &req.Agent)
	b.permit(&req, in)
	last := in.Messages[len(in.Messages)-1]
	if ad, ok := b.adapter(last.Adapter); ok {
		if sl, ok := ad.(adapters.StatusLiner); ok {
			// The chat shows what the turn does while the reply waits.
			req.OnStatus = func(st agent.Status) {
				if line := st.Line(); line != "" {
					sl.StatusLine(ctx, last.ChatID, line)
				}
			}
		}
	}
	// "mcp:<server>" names every tool the server has now: it starts the
	// server if no turn has needed it yet (a server with user_token, the
	// connection of the person the turn answers).
	user := req.User
	if user == "" && in.Session.Key.UserID != "" {
		user = in.Session.Key.Surface + ":" + in.Session.Key.UserID
	}
	req.Agent.Tools = b.mcp.ExpandFor(ctx, req.Agent.Tools, user)
	req.Agent.SkillDirs = SkillDirs(b.cfg(), a)
	return req
}

// callerRunID is the run id a caller waits on for m's turn (its message
// id), for a source whose caller follows the run (the API's Send returned
// it; send_message of the MCP server waits for it); "" for the others.
func (b *Bridge) callerRunID(m adapters.Inbound) string {
	if ad, ok := b.adapter(m.Adapter); ok && adapters.SourceOf(ad).Replies == adapters.RepliesToCaller {
		return m.MessageID
	}
	return ""
}

// AfterTurn compacts the session if the turn filled it, on the lane, once
// the reply is on its way.
func (b *Bridge) AfterTurn(ctx context.Context, in gateway.TurnInput) {
	defer b.retire(ctx, in)
	// The session's token count sums every live message's (generous)
	// estimate, so it bounds what any prompt can hold: below the
	// threshold, there is nothing to compact, and neither the history nor
	// the turn's tools need be looked at to find that out.
	a, _ := b.cfg().Agent(in.AgentID)
	if cfg := AgentConfig(a, in.Session.Key); cfg.MaxContextTokens > 0 {
		if n, err := b.sessions.TokenCount(ctx, in.Session.ID); err == nil && n < agent.Threshold(cfg, cfg.MaxContextTokens) {
			return
		}
	}
	res, err := b.runner.AfterTurn(ctx, b.request(ctx, in))
	if err != nil {
		b.log.WarnContext(ctx, "compaction after a turn failed; the next turn tries again", "session_id", in.Session.ID, "error", err)
		return
	}
	if res.Compacted {
		b.log.InfoContext(ctx, "session compacted", "session_id", in.Session.ID, "summarized", res.Summarized,
			"tokens_before", res.TokensBefore, "tokens_after", res.TokensAfter, "duration", res.Duration)
	}
}

// AgentConfig is the agent's configuration for a turn in a session.
func AgentConfig(a config.Agent, key sessions.Key) agent.AgentConfig {
	return agent.AgentConfig{
		ID: a.ID, Prompt: a.Prompt, WorkspaceDir: a.Workspace, Model: a.Model, MaxSteps: a.MaxSteps,
		HistoryTurns: historyTurns(a, key), OmitToolResults: a.History.OmitToolResults, Location: a.Location(), Tools: a.Tools,
		MaxOutputTokens: a.MaxOutputTokens, MaxContextTokens: a.MaxContextTokens,
		Compaction:     compactionConfig(a.Compaction),
		FallbackModels: a.FallbackModels, ReasoningEffort: a.ReasoningEffort, Timeouts: a.Timeouts.Timeouts(),
		Vision: a.Vision, MaxImages: a.Images.MaxPerTurn, MaxImageBytes: a.Images.MaxBytesPerTurn,
	}
}

// compactionConfig is an agent's compaction settings as the runner takes
// them.
func compactionConfig(c config.Compaction) agent.CompactionConfig {
	retries := c.Retries
	return agent.CompactionConfig{Threshold: c.Threshold, Model: c.Model, Notify: c.Notify,
		TailTurns: c.TailTurns, TailBudgetPct: c.TailBudgetPct, SummaryMaxTokens: c.SummaryMaxTokens,
		ReserveTokens: c.ReserveTokens, Retries: &retries,
		FlushTimeout: c.FlushTimeout.Std(), SummaryTimeout: c.SummaryTimeout.Std()}
}

// Compact answers /compact.
func (b *Bridge) Compact(ctx context.Context, s sessions.Session, agentID string) (string, error) {
	a, _ := b.cfg().Agent(agentID)
	res, err := b.runner.Compact(ctx, s, AgentConfig(a, s.Key))
	if err != nil && res.Skipped == "" {
		return "", err
	}
	return CompactionLine(res), nil
}

// CompactSession summarizes a session's older messages now, as /compact
// does (parley sessions compact), and says what it did in a line for a
// person.
func (b *Bridge) CompactSession(ctx context.Context, id sessions.ID) (string, error) {
	s, err := b.o.Sessions.Session(ctx, id)
	if err != nil {
		return "", err
	}
	a, ok := b.cfg().Agent(s.Key.AgentID)
	if !ok {
		return "", fmt.Errorf("session %s belongs to agent %q, which is not in the config any more", s.ID, s.Key.AgentID)
	}
	res, err := b.runner.Compact(ctx, s, AgentConfig(a, s.Key))
	if err != nil && res.Skipped == "" {
		return "", fmt.Errorf("compact session %s: %w", s.ID, err)
	}
	return CompactionLine(res), nil
}

// CompactionLine says what a compaction did, in a line for a person.
func CompactionLine(res agent.CompactionResult) string {
	if !res.Compacted {
		return "Nothing to compact: " + res.Skipped + "."
	}
	line := fmt.Sprintf("Summarized %d earlier messages", res.Summarized)
	if res.SummarizedTurns > 0 {
		line += fmt.Sprintf(" (%s, from %q to %q)", plural(res.SummarizedTurns, "turn"), res.SummarizedFrom, res.SummarizedTo)
	}
	line += fmt.Sprintf(": ~%d tokens of context down to ~%d.", res.TokensBefore, res.TokensAfter)
	if res.KeptTurns > 0 {
		line += fmt.Sprintf(" Kept the last %s (%s) as they are, from %q.", plural(res.KeptTurns, "turn"), plural(res.KeptMessages, "message"), res.KeptFrom)
	}
	if res.Memories > 0 {
		line += fmt.Sprintf(" Saved %d memories first.", res.Memories)
	}
	return line
}

// plural is "1 turn" or "n turns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func historyTurns(a config.Agent, k sessions.Key) int {
	switch k.Kind() {
	case sessions.SurfaceCron:
		return a.History.Cron
	case sessions.SurfaceWebhook:
		return a.History.Webhook
	case sessions.SurfaceCLI:
		return a.History.CLI
	case sessions.SurfaceAPI:
		return a.History.API
	case sessions.SurfaceMCP:
		return a.History.MCP
	}
	return a.History.Channels
}

// Status answers /status.
func (b *Bridge) Status(ctx context.Context, s sessions.Session, queued int) string {
	a, _ := b.cfg().Agent(s.Key.AgentID)
	st := b.runner.Status(s.ID)
	state := string(st.State)
	if st.Message != "" && st.State != agent.StateError {
		// An error's text is the operator's (the log, the API's status):
		// the gateway adds its reference id below.
		state += " (" + st.Message + ")"
	}
	// One token figure: the forecast's count of what the next prompt
	// holds, or the session's running total when there is no forecast.
	f, err := b.runner.Forecast(ctx, s, AgentConfig(a, s.Key))
	used := s.Rollup.TokenCount
	if err != nil {
		b.log.WarnContext(ctx, "compaction forecast for /status", "session_id", s.ID, "error", err)
	} else if f.Threshold > 0 {
		used = int64(f.Used)
	}
	model := cmp.Or(agent.SessionModel(s.Metadata), a.Model)
	effort := cmp.Or(agent.SessionEffort(s.Metadata), a.ReasoningEffort, "default")
	line := fmt.Sprintf("Session %s · agent %s · model %s · thinking %s\n~%d of %d tokens used · %d messages · %d queued · %s",
		s.Key, a.ID, model, effort, used, a.MaxContextTokens, s.MessageCount, queued, state)
	if ran := b.lastTurnSettings(ctx, s.ID); ran.Model != "" {
		line += fmt.Sprintf("\nLast turn ran on %s, thinking %s.", ran.Model, cmp.Or(ran.ReasoningEffort, "default"))
	}
	switch {
	case err != nil:
	case f.Threshold > 0 && f.TurnsLeft >= 0:
		line += fmt.Sprintf("\nCompaction at ~%d tokens: about %d more turns.", f.Threshold, f.TurnsLeft)
	case f.Threshold > 0:
		line += fmt.Sprintf("\nCompaction at ~%d tokens.", f.Threshold)
	}
	// What the spend caps have left today.
	if b, berr := b.o.Caps.Budget(ctx, s.Key, s.ID); berr == nil && b.Line() != "" {
		line += "\n" + b.Line()
	}
	return line
}

// retire archives a cron fire's or webhook delivery's session once
// its one run has ended and its reply is queued: nothing else ever writes
// to it, and left active each would stay in sessions ls for ever (a
// minutely job adds 1,440 a day). It stays readable, archived.
func (b *Bridge) retire(ctx context.Context, in gateway.TurnInput) {
	if !in.Session.Key.SingleRun() {
		return
	}
	if _, err := b.sessions.Archive(context.WithoutCancel(ctx), in.Session.ID, sessions.ReasonFinished); err != nil {
		b.log.WarnContext(ctx, "archive a finished run's session; it stays active", "session_id", in.Session.ID, "error", err)
	}
}

// SkillDirs are the folders an agent's skills are found in: its
// workspace's skills folder first, then skills.dirs.
func SkillDirs(cfg *config.Config, a config.Agent) []string {
	var dirs []string
	if a.Workspace != "" {
		dirs = append(dirs, filepath.Join(a.Workspace, "skills"))
	}
	return append(dirs, cfg.Skills.Dirs...)
}

// lastTurnSettings is what the session's latest turn ran with, as its user
// message recorded it (zero when none did).
func (b *Bridge) lastTurnSettings(ctx context.Context, id sessions.ID) agent.TurnSettings {
	msgs, err := b.sessions.Messages(ctx, id, sessions.MessagesOptions{})
	if err != nil {
		return agent.TurnSettings{}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if ts, ok := agent.TurnOf(msgs[i]); ok && msgs[i].Role == sessions.RoleUser {
			return ts
		}
	}
	return agent.TurnSettings{}
}

// Models opens models by spec. Each provider's client is built once
// and shared by every turn; the runner puts the model's own name in each
// request. A model whose provider has no key fails with
// llm.ErrNotConfigured, as the start-up warning said: its chats are told
// the assistant isn't configured, rather than answered by echo.
func Models(cfg *config.Config) func(spec string) (llm.Model, error) {
	return ModelsWith(cfg, echo.New())
}

// ModelsWith is Models answering offline through the given echo
// model, which tests read.
func ModelsWith(cfg *config.Config, offline *echo.Model) func(spec string) (llm.Model, error) {
	clients := map[string]llm.Model{}
	for name, p := range cfg.Providers {
		if prov, ok := llm.Lookup(name); ok && p.Configured() {
			clients[name] = llm.WithLimit(prov.New(p.Settings()), p.MaxConcurrent)
		}
	}
	return func(spec string) (llm.Model, error) {
		provider, _, err := llm.ParseModel(spec)
		if err != nil {
			return nil, err
		}
		if m, ok := clients[provider]; ok {
			return m, nil
		}
		if provider != "echo" {
			return nil, fmt.Errorf("%w: providers.%s has neither an api_key nor a base_url; set one, or give the agent model: echo",
				llm.ErrNotConfigured, provider)
		}
		return offline, nil
	}
}
