package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/commands"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/telemetry"
)

// Recovery says what to do, on start, with messages accepted before a crash
// that never got an answer.
type Recovery string

const (
	// RecoveryRerun runs them again.
	RecoveryRerun Recovery = "rerun"
	// RecoveryMark marks them and tells each sender the message was not answered.
	RecoveryMark Recovery = "mark"
)

// Agent is what the gateway needs to know about an agent.
type Agent struct {
	ID     string
	Policy sessions.Policy
	Mode   Mode
	// Models are the models /model may switch a session to, the agent's
	// own first; none: /model only says it can't switch.
	Models []string
	// Effort is the agent's own reasoning effort ("": the provider's),
	// which /think shows when a session has none of its own.
	Effort string
}

// TurnInput is what a turn answers.
type TurnInput struct {
	Session  sessions.Session
	AgentID  string
	Messages []adapters.Inbound
	// IDs are the messages' inbound record ids, in the same order: stable
	// across a re-run after a crash.
	IDs []string
	// Rerun says a try before this one may have begun the turn (a
	// message recovered after a crash, or taken over from a replica that
	// stopped): what it kept, such as the messages' files, may be there.
	Rerun bool
	// Steer takes messages that arrived during the turn (steer mode), with
	// their inbound record ids.
	Steer func() (msgs []adapters.Inbound, ids []string)
	// OnText, when set, takes the reply's text as it is written, for a
	// channel that shows replies as they stream. It must not block.
	OnText func(delta string)
	// Finish, when set, records the turn's outcome (its messages answered,
	// the reply queued in the outbox) in q, the transaction that stores
	// the reply in the session, given the reply text Run returns:
	// the reply, the outcome and the outbox rows then commit together, in
	// one durable write instead of two. A Run that called it and
	// returns no error has finished the turn; the gateway records nothing
	// more. It is nil when the reply streams (its final edit is known
	// only once the stream ends).
	Finish func(ctx context.Context, q dbutil.Querier, reply string) error
	// Attach, called before Finish (or before Run returns), gives the
	// files the reply carries (send_file), replacing any given before:
	// each goes out after the reply's text, through the outbox.
	Attach func(files []adapters.OutFile)
	// Speak, called before Finish (or before Run returns), makes the
	// reply a voice note (a spoken reply; see Sender.deliverVoice).
	Speak func()
}

// Options configure a Gateway.
type Options struct {
	Store    *Store
	Sessions sessions.Store
	Sender   *Sender
	// Runner runs the turns (the agent).
	Runner Runner
	// Channels are where replies go; nil: none (replies are recorded only).
	Channels Channels
	// Access is each adapter's access policy; adapters without one (the
	// CLI, cron, webhooks, the API) let everything in.
	Access map[adapters.ID]Access
	// Route picks the agent for a message; nil routes everything to Agents[0].
	Route func(in adapters.Inbound) string
	// Workspace, if set, picks the workspace of a message's session (part
	// of its key, and its memory's scope) when the message names none.
	Workspace func(in adapters.Inbound) string
	Agents    []Agent
	// Recovery says what to do with messages a crash left unanswered.
	Recovery Recovery
	// StoreRetry is the longest wait between tries of a write that failed
	// because the database was unavailable (default 2s); the lane holds
	// its place meanwhile, so its messages keep their order.
	StoreRetry time.Duration
	// Seed, if set, adds what a session should start with when a message
	// begins the session (a new conversation, or one replacing a stale
	// session), in place of the notes sent to its chat lately. It runs
	// before the message is stored and says whether it added anything; its
	// error is logged, and the message goes on.
	Seed func(ctx context.Context, s sessions.Session, in adapters.Inbound) (bool, error)
	// Surface is the surface a channel's chats are on (its type, such as
	// telegram), for the notes sent to them; nil or "" means its id.
	Surface func(id adapters.ID) string
	// Placement, when set, places each session's turns on one replica of
	// several sharing the database (package cluster): a message whose
	// session another replica holds is handed to it.
	Placement Placement
	// OnDuplicate, if set, hears of each redelivered message dropped.
	OnDuplicate func()
	// Connections keeps people's own tokens (/connect); nil: /connect
	// says it is not available.
	Connections Connections
	// ConnectTimeout is how long, after /connect, the sender's next
	// message is taken as the token (default 5 minutes).
	ConnectTimeout time.Duration
	// Speaks says a speech provider is set up, for /voice's answer.
	Speaks bool
	// Transcriber, when set, transcribes voice notes before they are
	// stored; nil: they reach the agent as files.
	Transcriber Transcriber
	Lanes       LaneOptions[string]
	// Tracer, when set, traces each turn: a span from its message's
	// queueing to its end, under the span of the request or cron fire
	// that delivered it.
	Tracer *telemetry.Tracer
	Log    *slog.Logger
}

// Gateway is gateway.Deliver and everything behind it.
type Gateway struct {
	// caps are the channels' capabilities, read once.
	caps adapters.CapabilityCache
	// settling are accepted messages a database fault left undecided,
	// by platform message, until settle or their redelivery takes them.
	settlingMu sync.Mutex
	settling   map[settleKey]job
	settles    sync.WaitGroup

	opts       Options
	lanes      *Lanes[string, job]
	pol        atomic.Pointer[policyTable] // agents and access, replaced by a reload
	duplicates atomic.Int64
	denied     atomic.Int64
	// picked are the messages handed to this replica that it dispatched,
	// until they are answered (see Pickup).
	pickMu sync.Mutex
	picked map[string]bool
	// order keeps a session's messages in their order among replicas: a
	// takeover of a dead replica's messages (held exclusively) queues
	// them all before any newer message is placed (held shared).
	order    sync.RWMutex
	failures failures // each session's last failure, for /status
	pending  pendingConnects
	acks     acks // the ack reactions on messages waiting for their answer
}

type job struct {
	inboundID string
	in        adapters.Inbound
	key       sessions.Key
	agent     string
	// barrier is a command run in order on the lane, between turns: the
	// name of a commands.Barrier command.
	barrier string
	// repair is the session a crash interrupted this message's turn in:
	// it is finalized on the lane before anything runs there.
	repair sessions.ID
	// mark answers a recovered message with an apology instead of a turn.
	mark bool
	// contextOnly keeps a group message the bot wasn't addressed in as
	// context, without a turn.
	contextOnly bool
	// refused, when set, takes a queue-full refusal instead of an answer
	// in the chat: the API says it in its response.
	refused *error
	// takenOver: recovery dispatches it, holding order.
	takenOver bool
	// parent is the span that delivered it (an API request's, a cron
	// fire's; none for a chat message or a recovered one), and queued
	// when it was queued: its turn's span hangs under parent and begins
	// at queued. Both are kept only while tracing is on.
	parent telemetry.Parent
	queued time.Time
}

// New builds a gateway; call Recover, then let adapters Deliver.
func New(opts Options) (*Gateway, error) {
	if len(opts.Agents) == 0 {
		return nil, errors.New("gateway: no agents configured")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Recovery == "" {
		opts.Recovery = RecoveryRerun
	}
	if opts.Runner == nil {
		return nil, errors.New("gateway: no runner configured")
	}
	if opts.Channels == nil {
		opts.Channels = noChannels{}
	}
	if opts.StoreRetry <= 0 {
		opts.StoreRetry = 2 * time.Second
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Minute
	}
	g := &Gateway{opts: opts}
	g.SetPolicies(opts.Agents, opts.Access)
	laneOpts := opts.Lanes
	laneOpts.Log = opts.Log
	laneOpts.Mode = func(key string) Mode {
		agentID, _, _ := strings.Cut(key, "\x00")
		return g.policies().agents[agentID].Mode
	}
	g.lanes = NewLanes(g.turn, laneOpts)
	return g, nil
}

// LaneKey is the lane a session's turns run on, one at a time.
func LaneKey(k sessions.Key) string { return laneKey(k) }

// laneKey is the session key as a lane key, with the agent id first so the
// lane's mode can be found.
func laneKey(k sessions.Key) string {
	return strings.Join([]string{k.AgentID, k.Surface, k.SurfaceID, k.UserID, k.WorkspaceID}, "\x00")
}

// SessionKey is the session an inbound message belongs to.
func SessionKey(in adapters.Inbound, agentID string) sessions.Key {
	k := sessions.ChatKey(in.Surface, in.ChatID, in.UserID, agentID)
	if in.Group {
		k = sessions.GroupKey(in.Surface, in.ChatID, agentID)
	}
	k.WorkspaceID = in.Workspace
	return k
}

// Denied counts messages the access policy turned away.
func (g *Gateway) Denied() int64 { return g.denied.Load() }

// Duplicates is how many redelivered messages were dropped.
func (g *Gateway) Duplicates() int64 { return g.duplicates.Load() }

// Deliver takes one platform message. It returns nil once the message is
// stored durably (or was already): the adapter's licence to acknowledge it.
// The turn runs later, on the session's lane.
func (g *Gateway) Deliver(ctx context.Context, in adapters.Inbound) error {
	return g.DeliverWith(ctx, in, nil)
}

// DeliverWith is Deliver that also runs also in the transaction that
// stores the message, when it is new (see Store.AcceptWith): a producer's
// record of the message commits with it, in one durable write.
func (g *Gateway) DeliverWith(ctx context.Context, in adapters.Inbound, also func(q dbutil.Querier) error) error {
	return g.deliver(ctx, in, also, nil)
}

// Submit is Deliver for a caller that answers its sender itself (the
// API): a message the session's queue has no room for is recorded as
// refused and returned as ErrQueueFull, rather than answered in the chat.
// A nil error means the message is stored and queued for its turn.
func (g *Gateway) Submit(ctx context.Context, in adapters.Inbound) error {
	var refused error
	if err := g.deliver(ctx, in, nil, &refused); err != nil {
		return err
	}
	return refused
}

func (g *Gateway) deliver(ctx context.Context, in adapters.Inbound, also func(q dbutil.Querier) error, refused *error) error {
	if err := in.Validate(); err != nil {
		return err
	}
	if in.Time.IsZero() {
		in.Time = time.Now()
	}
	if t, ok := g.takeToken(in); ok {
		// A token for /connect: never stored as it came, never a turn.
		return g.acceptToken(ctx, in, t)
	}
	if g.opts.Placement != nil {
		// The token comes to the replica this /connect came to, which
		// may not be the one running the chat's session (where the
		// command runs): it waits for it here too.
		g.waitTokenHere(ctx, in)
	}
	// Before it is stored, so the gate, the turn and a replay after a
	// crash all read the transcript.
	in = g.transcribe(ctx, in)
	id, dup, err := g.opts.Store.AcceptWith(ctx, in, also)
	if err != nil {
		if id != "" && g.opts.Store.Shared() && (dbutil.Unavailable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			// The connection may have died after the commit went through,
			// or the wait for its answer was given up (a frozen database,
			// a channel stopped meanwhile) with the statement on its way:
			// settle the message once the database answers. A channel
			// redelivers it (a duplicate then), so it runs; the API's
			// client was told to send it again, so its copy doesn't.
			g.startSettle(job{inboundID: id, in: in}, refused == nil)
		}
		return err
	}
	if dup {
		if j, ok := g.takeSettling(in); ok {
			// The redelivery of a message whose accept went through though
			// its answer was lost: it runs now, in its place, before the
			// chat's next message.
			g.dispatch(ctx, j)
			return nil
		}
		g.duplicates.Add(1)
		if g.opts.OnDuplicate != nil {
			g.opts.OnDuplicate()
		}
		g.opts.Log.DebugContext(ctx, "duplicate message dropped", "adapter", in.Adapter, "chat_id", in.ChatID, "message_id", in.MessageID)
		return nil
	}
	g.dispatch(ctx, job{inboundID: id, in: in, refused: refused, parent: telemetry.ParentOf(ctx)})
	return nil
}

// dispatch handles commands at once and queues everything else.
func (g *Gateway) dispatch(ctx context.Context, j job) {
	j.agent = g.route(j.in)
	if j.in.Workspace == "" && g.opts.Workspace != nil {
		j.in.Workspace = g.opts.Workspace(j.in)
	}
	j.key = SessionKey(j.in, j.agent)
	if g.opts.Placement != nil {
		unlock, here := g.place(ctx, j)
		if !here {
			return
		}
		defer unlock()
	}
	switch d, err := g.access(ctx, j); {
	case err != nil && dbutil.Unavailable(err):
		// Accepted, but the database went away before the check: the
		// message runs once it answers.
		g.opts.Log.WarnContext(ctx, "access check met an unavailable database; the message runs once it answers", "adapter", j.in.Adapter, "chat_id", j.in.ChatID, "error", err)
		j.refused = nil // the caller has its answer already
		g.startSettle(j, true)
		return
	case err != nil:
		g.opts.Log.ErrorContext(ctx, "access check", "adapter", j.in.Adapter, "chat_id", j.in.ChatID, "error", err)
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundFailed, err: "access check: " + err.Error(), replyTo: j})
		return
	case d == deny || d == pairingSent:
		g.denied.Add(1)
		g.opts.Log.DebugContext(ctx, "message denied by the access policy", "adapter", j.in.Adapter,
			"chat_id", j.in.ChatID, "user_id", j.in.UserID, "group", j.in.Group, "pairing", d == pairingSent)
		if d == deny {
			g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, err: "denied by the access policy", replyTo: j})
		}
		return
	case d == answered:
		return
	case d == contextOnly:
		j.contextOnly = true
	}
	if j.in.Edits != "" {
		// An edit is weighed between turns, once what came before it is
		// answered: only then is it known whether it edits the latest.
		g.queueEdit(ctx, j)
		return
	}
	c, isCommand := commands.Parse(j.in.Text)
	if isCommand && j.contextOnly {
		// A command in a group must address the bot; this one didn't.
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, err: "command not addressed to the bot", replyTo: j})
		return
	}
	if isCommand && !forAnotherBot(j.in) {
		g.command(ctx, j, c)
		return
	}
	if !j.contextOnly && !j.mark && !isCommand {
		// Before it is queued, so its answer always finds it.
		g.acknowledge(ctx, j)
	}
	if g.opts.Tracer.Enabled() {
		j.queued = time.Now()
	}
	depth, err := g.lanes.Enqueue(laneKey(j.key), j)
	if err != nil {
		g.acknowledged(ctx, []job{j})
	}
	switch {
	case errors.Is(err, ErrQueueFull) && j.refused != nil:
		*j.refused = fmt.Errorf("%w: %d earlier messages of this session are waiting; send this again once they are answered", ErrQueueFull, depth)
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundFailed, err: "queue full", replyTo: j})
	case errors.Is(err, ErrQueueFull):
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundFailed, err: "queue full", replyTo: j,
			text: fmt.Sprintf("I'm still working through %d earlier messages; please wait a moment and send this again.", depth)})
	case err != nil: // shutting down: the next start re-runs it
		g.opts.Log.WarnContext(ctx, "message left for the next start", "adapter", j.in.Adapter, "chat_id", j.in.ChatID, "error", err)
	}
}

func (g *Gateway) route(in adapters.Inbound) string {
	pol := g.policies()
	if _, ok := pol.agents[in.AgentID]; ok && in.AgentID != "" {
		return in.AgentID
	}
	if g.opts.Route != nil {
		if id := g.opts.Route(in); id != "" {
			if _, ok := pol.agents[id]; ok {
				return id
			}
		}
	}
	return pol.first
}

// policyTable is what a reload can change: the agents (their queue modes
// and session policies) and each channel's access policy.
type policyTable struct {
	agents map[string]Agent
	first  string // the default agent
	access map[adapters.ID]Access
}

func (g *Gateway) policies() *policyTable { return g.pol.Load() }

// SetPolicies replaces the agents and the channels' access policies, as a
// reload of the config does: messages taken from now on follow them; a
// turn already running keeps what it started with. It ignores an empty
// list of agents (New refuses one).
func (g *Gateway) SetPolicies(agents []Agent, access map[adapters.ID]Access) {
	if len(agents) == 0 {
		return
	}
	t := &policyTable{agents: make(map[string]Agent, len(agents)), first: agents[0].ID, access: access}
	for _, a := range agents {
		t.agents[a.ID] = a
	}
	g.pol.Store(t)
}

// forAnotherBot reports a group command addressed to another bot
// ("/reset@otherbot"): the channel says the message didn't mention us.
func forAnotherBot(in adapters.Inbound) bool {
	return in.Group && !in.Mentioned && strings.Contains(strings.TrimSpace(in.Text), "@")
}

// turn runs on a session's lane: it resolves the session there, so resets
// and compactions happen between turns, never during one.
func (g *Gateway) turn(ctx context.Context, _ string, t *Turn[job]) {
	// A batch may hold barriers: run what precedes each one, then it.
	items := t.Items
	for len(items) > 0 && !shuttingDown(ctx) {
		i := 0
		for i < len(items) && items[i].barrier == "" {
			i++
		}
		if i > 0 {
			// Only the batch's last segment may take steered messages: they
			// arrived after any barrier in it.
			var steer func() []job
			if i == len(items) {
				steer = t.Steer
			}
			g.runMessages(ctx, items[:i], steer)
		}
		if i < len(items) && !shuttingDown(ctx) {
			if items[i].barrier == editBarrier {
				g.edit(ctx, items[i])
			} else {
				g.runCommand(ctx, items[i], items[i].barrier)
			}
			i++
		}
		items = items[i:]
	}
}

// runMessages runs one agent turn for messages, after finishing what a
// crash left of their sessions; a recovered message its turn had already
// answered gets that answer, and recovered messages under "mark" get an
// apology instead.
func (g *Gateway) runMessages(ctx context.Context, items []job, steer func() []job) {
	g.repair(ctx, items)
	var run []job
	for _, j := range items {
		if j.contextOnly {
			g.remember(ctx, j, "")
			continue
		}
		if j.in.VoiceFailed != "" && strings.TrimSpace(j.in.Text) == "" {
			// Nothing to answer but the voice note nobody could hear: kept
			// in the session, and the person told so.
			g.remember(ctx, j, fmt.Sprintf(voiceNotUnderstood, j.in.VoiceFailed))
			continue
		}
		if j.repair != "" && g.alreadyAnswered(ctx, j) {
			continue
		}
		if j.mark {
			g.complete(ctx, outcome{jobs: []job{j}, status: InboundMarked, session: j.repair, err: "unanswered at restart", replyTo: j,
				text: "Sorry, I restarted before answering your message; please send it again if you still need an answer."})
			continue
		}
		run = append(run, j)
	}
	if len(run) == 0 {
		return
	}
	g.runTurn(ctx, run, steer)
}

// resolve is the active session of key for a message in, seeded if the
// message begins it.
func (g *Gateway) resolve(ctx context.Context, key sessions.Key, policy sessions.Policy, in adapters.Inbound) (sessions.Session, error) {
	sess, created, err := g.opts.Sessions.Resolve(ctx, key, policy)
	if err != nil || !created {
		return sess, err
	}
	seed := g.opts.Seed
	if seed == nil {
		seed = g.SeedNotes
	}
	added, err := seed(ctx, sess, in)
	if err != nil {
		g.opts.Log.WarnContext(ctx, "seed a new session", "session_key", key.String(), "session_id", sess.ID, "error", err)
	}
	if !added {
		return sess, nil
	}
	if seeded, err := g.opts.Sessions.Active(ctx, key); err == nil && seeded.ID == sess.ID {
		sess = seeded // with what the seed added
	}
	return sess, nil
}

// remember keeps a group message the bot wasn't addressed in: stored in the
// session as context for later turns, with reply as its answer ("": none).
func (g *Gateway) remember(ctx context.Context, j job, reply string) {
	agent := g.policies().agents[j.agent]
	var sess sessions.Session
	err := g.untilStored(ctx, ctx, "keep a group message as context", func() (err error) {
		if sess, err = g.resolve(ctx, j.key, agent.Policy, j.in); err != nil {
			return err
		}
		_, err = g.opts.Sessions.Append(ctx, sess.ID, sessions.Message{ID: sessions.MessageID(j.inboundID),
			Role: sessions.RoleUser, Content: j.in.Attributed(), Parts: fileParts(j.in)})
		return err
	})
	if err != nil {
		g.opts.Log.ErrorContext(ctx, "keep a group message as context", "session_key", j.key.String(), "error", err)
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundFailed, err: err.Error(), replyTo: j})
		return
	}
	g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, session: sess.ID, replyTo: j, text: reply})
}

// runTurn runs one agent turn for messages.
func (g *Gateway) runTurn(ctx context.Context, items []job, steer func() []job) {
	first := items[0]
	last := items[len(items)-1]
	ctx, span := g.traceTurn(ctx, items)
	defer span.End()
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("panic: %v", p)
			ref, text := g.failed(ctx, first.key, "turn panicked", err, "Sorry, something went wrong while answering", "stack", string(debug.Stack()))
			g.complete(ctx, outcome{jobs: items, status: InboundFailed, err: "ref " + ref + ": " + err.Error(), replyTo: last, text: text})
		}
	}()
	agent := g.policies().agents[first.agent]
	var sess sessions.Session
	err := g.untilStored(ctx, ctx, "open the session", func() (err error) {
		sess, err = g.resolve(ctx, first.key, agent.Policy, first.in)
		return err
	})
	if shuttingDown(ctx) {
		return // left accepted: the next start runs it
	}
	if err != nil {
		span.Fail(err)
		ref, text := g.failed(ctx, first.key, "resolve session", err, "Sorry, I couldn't open this conversation's history")
		g.complete(ctx, outcome{jobs: items, status: InboundFailed, err: "ref " + ref + ": " + err.Error(), replyTo: last, text: text})
		return
	}
	span.Str(telemetry.AttrSession, string(sess.ID))
	span.Str(telemetry.GenAIConversation, string(sess.ID))
	msgs := make([]adapters.Inbound, len(items))
	ids := make([]string, len(items))
	for i, j := range items {
		msgs[i], ids[i] = j.in, j.inboundID
	}
	var steered []job
	rerun := false
	for _, j := range items {
		rerun = rerun || j.repair != "" || j.takenOver
	}
	input := TurnInput{Session: sess, AgentID: agent.ID, Messages: msgs, IDs: ids, Rerun: rerun, Steer: func() ([]adapters.Inbound, []string) {
		if steer == nil {
			return nil, nil
		}
		var out []adapters.Inbound
		var outIDs []string
		for _, j := range steer() {
			steered = append(steered, j)
			out = append(out, j.in)
			outIDs = append(outIDs, j.inboundID)
		}
		return out, outIDs
	}}
	stream := g.startStream(ctx, last.in)
	if stream != nil {
		input.OnText = stream.add
	}
	var attached []adapters.OutFile
	input.Attach = func(files []adapters.OutFile) { attached = files }
	speak := false
	input.Speak = func() { speak = true }
	// Without a stream, the reply's append records the turn's outcome.
	finished := false
	var reported *report
	if stream == nil {
		input.Finish = func(fctx context.Context, q dbutil.Querier, reply string) error {
			all := append(append([]job(nil), items...), steered...)
			o := outcome{jobs: all, status: InboundDone, session: sess.ID, replyTo: last, text: reply, files: attached, speak: speak}
			ids, replies, rep := g.record(o)
			if err := g.opts.Store.CompleteIn(fctx, q, ids, o.status, string(o.session), o.err, replies); err != nil {
				return err
			}
			if err := rep.queue(fctx, q); err != nil {
				return err
			}
			finished, reported = true, rep
			return nil
		}
	}
	stopTyping := g.keepTyping(ctx, first.in)
	// A try the database fails under is tried again within Run, once the
	// database answers; the lane holds its place meanwhile.
	reply, err := g.opts.Runner.Run(ctx, input)
	span.Content(telemetry.AttrOutput, reply)
	if err != nil && !errors.Is(err, context.Canceled) {
		span.Fail(err)
	}
	if err != nil {
		// A try's Finish may have run in a transaction that didn't
		// commit: the outcome is recorded below, as for any failure.
		finished = false
	}
	stopTyping()
	shown := stream.finish()
	all := append(append([]job(nil), items...), steered...)
	if finished && err == nil {
		// Its outcome and reply committed with the reply's append.
		g.acknowledged(ctx, all)
		reported.done(ctx)
		if g.opts.Sender != nil {
			g.opts.Sender.Wake()
		}
		if !shuttingDown(ctx) {
			g.opts.Runner.AfterTurn(ctx, input)
		}
		return
	}
	if shuttingDown(ctx) {
		// Cut short by shutdown: the messages stay accepted, so the next
		// start repairs the session and runs them again.
		g.opts.Log.WarnContext(ctx, "turn cut short by shutdown; it runs again on the next start", "session_id", sess.ID)
		return
	}
	switch {
	case errors.Is(err, context.Canceled):
		g.complete(ctx, outcome{jobs: all, status: InboundDone, session: sess.ID, err: "aborted", replyTo: last, text: reply, shown: shown})
	case err != nil:
		ref, text := g.failed(ctx, first.key, "turn failed", err, "Sorry, something went wrong while answering", "session_id", sess.ID)
		g.complete(ctx, outcome{jobs: all, status: InboundFailed, session: sess.ID, err: "ref " + ref + ": " + err.Error(), replyTo: last, text: text, shown: shown})
	default:
		g.complete(ctx, outcome{jobs: all, status: InboundDone, session: sess.ID, replyTo: last, text: reply, shown: shown, files: attached, speak: speak})
	}
	if !shuttingDown(ctx) {
		g.opts.Runner.AfterTurn(ctx, input)
	}
}

// typingAfter is how long a turn runs before the typing indicator shows: a
// reply ready sooner is itself the sign of life, and a turn doesn't wait on
// a platform call before it starts. typingEvery is how often the indicator
// is renewed; platforms drop it after about five seconds.
const (
	typingAfter = 300 * time.Millisecond
	typingEvery = 4 * time.Second
)

// capabilities are what the channel called id can do; none when it is
// not running.
func (g *Gateway) capabilities(id adapters.ID) adapters.Capabilities {
	ad, ok := g.opts.Channels.Adapter(id)
	if !ok {
		return adapters.Capabilities{}
	}
	return g.caps.Of(id, ad)
}

// keepTyping shows the typing indicator from typingAfter on, until the
// returned stop is called. It runs from a timer, so a waiting turn holds no
// goroutine for it, and stop waits for a request under way, so no
// indicator is sent after the turn's reply.
func (g *Gateway) keepTyping(ctx context.Context, in adapters.Inbound) (stop func()) {
	typer := g.capabilities(in.Adapter).Typing
	if typer == nil {
		return func() {}
	}
	typing := func(ctx context.Context, chatID string) {
		// A failure costs only the indicator.
		if err := typer.Typing(ctx, chatID); err != nil && ctx.Err() == nil {
			g.opts.Log.DebugContext(ctx, "typing indicator", "adapter", in.Adapter, "error", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex // held while sending, so stop waits for a request under way
	stopped := false
	var t *time.Timer
	// t is set under mu, which the timer's function takes first: on a busy
	// machine it can fire before AfterFunc has returned.
	mu.Lock()
	t = time.AfterFunc(typingAfter, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		typing(ctx, in.ChatID)
		t.Reset(typingEvery)
	})
	mu.Unlock()
	return func() {
		cancel() // ends a request under way
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// shuttingDown reports whether ctx ended because the lanes shut down, as
// opposed to /stop or an interrupt.
func shuttingDown(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrClosed)
}

// Close stops taking messages and drains the lanes until ctx ends.
func (g *Gateway) Close(ctx context.Context) error {
	err := g.lanes.Close(ctx)
	g.settles.Wait() // they end with the lanes
	return err
}

// Busy reports whether a session has a turn running or waiting.
func (g *Gateway) Busy(k sessions.Key) bool { return g.lanes.Busy(laneKey(k)) }

// Abort stops a session's running turn.
func (g *Gateway) Abort(k sessions.Key) bool { return g.lanes.Abort(laneKey(k)) }

// ActiveLanes is the number of sessions with work.
func (g *Gateway) ActiveLanes() int { return g.lanes.Active() }

// QueueDepth is how many messages wait in all sessions' lanes.
func (g *Gateway) QueueDepth() int { return g.lanes.Waiting() }
