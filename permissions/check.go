package permissions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// DefaultAskTimeout is how long a question waits for an answer before the
// call is denied.
const DefaultAskTimeout = 5 * time.Minute

// Options configures a Checker.
type Options struct {
	// Policy is the config's rules; nil has none (only the defaults).
	Policy *Policy
	// Store keeps the answers that last ("always"); nil remembers none,
	// and those answers allow the one call.
	Store *Store
	// AskTimeout bounds the wait for an answer; 0 is DefaultAskTimeout.
	AskTimeout time.Duration
	// External says whether a tool asks by default; nil is IsMCP.
	External func(tool string) bool
	// SharedGroupGrants makes a group member's "Always in this chat"
	// hold for every member; by default it holds for that member only.
	SharedGroupGrants bool
	Now               func() time.Time
	Log               *slog.Logger
}

// Checker decides each tool call: it evaluates the rules, asks the person
// when they say ask, and stores the answers that last. Safe for concurrent
// use.
type Checker struct {
	opts    Options
	policy  atomic.Pointer[Policy]
	timeout atomic.Int64 // the ask timeout, in nanoseconds
	shared  atomic.Bool  // SharedGroupGrants
}

// NewChecker returns a Checker.
func NewChecker(opts Options) *Checker {
	if opts.AskTimeout <= 0 {
		opts.AskTimeout = DefaultAskTimeout
	}
	if opts.External == nil {
		opts.External = IsMCP
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Checker{opts: opts}
	c.policy.Store(opts.Policy)
	c.shared.Store(opts.SharedGroupGrants)
	c.timeout.Store(int64(opts.AskTimeout))
	return c
}

// SetPolicy replaces the config's rules, as a reload does; calls checked
// from now on follow them.
func (c *Checker) SetPolicy(p *Policy) { c.policy.Store(p) }

// AskTimeout is how long a question waits for an answer.
func (c *Checker) AskTimeout() time.Duration { return time.Duration(c.timeout.Load()) }

// SetAskTimeout changes the ask timeout, as a reload does; 0 is
// DefaultAskTimeout.
func (c *Checker) SetAskTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultAskTimeout
	}
	c.timeout.Store(int64(d))
}

// SetSharedGroupGrants changes whether a group member's "Always in this
// chat" holds for every member, as a reload does.
func (c *Checker) SetSharedGroupGrants(shared bool) { c.shared.Store(shared) }

// SharedGroupGrants says whether a group member's "Always in this chat"
// holds for every member.
func (c *Checker) SharedGroupGrants() bool { return c.shared.Load() }

// Call is one tool call to judge.
type Call struct {
	Tool      string
	Arguments json.RawMessage
	SessionID string
	AgentID   string
	Origin    Origin
}

// Verdict judges a call by the rules alone (config and stored), without
// asking anyone. A subagent's call is judged by its own agent's rules and
// by each of its callers' (Origin.Callers), with the person's stored
// answers for the root: the strictest verdict wins, so a subagent never
// has more rights than the chat it was spawned from.
func (c *Checker) Verdict(ctx context.Context, call Call) (Verdict, error) {
	external := c.opts.External(call.Tool)
	var (
		worst Verdict
		st    *Stored
	)
	for i, agent := range judges(call) {
		v, err := c.verdictFor(ctx, call, agent, external, &st)
		if err != nil {
			return v, err
		}
		if agent != call.AgentID {
			v.Of = agent
		}
		if i == 0 || stricter(v, worst) {
			worst = v
		}
	}
	return worst, nil
}

// verdictFor judges call by agent's rules and, when they don't settle it,
// the person's stored answers (read once into *st).
func (c *Checker) verdictFor(ctx context.Context, call Call, agent string, external bool, st **Stored) (Verdict, error) {
	l := c.policy.Load().layers(agent, call.Origin.User)
	v := Evaluate(call.Tool, l, external)
	sessionID, grantAgent := grantTarget(call)
	// Stored rules only allow, so they can change only an ask or an
	// unpinned deny: the common call (allowed by the config) reads nothing.
	if v.Pinned || v.Decision == Allow || c.opts.Store == nil || sessionID == "" {
		return v, nil
	}
	if *st == nil {
		got, err := c.opts.Store.Grants(ctx, sessionID, grantAgent, call.Origin.User, c.sessionGrantsOf(call.Origin))
		if err != nil {
			return v, err
		}
		*st = &got
	}
	if (*st).Session.Len() == 0 && (*st).Project.Len() == 0 {
		return v, nil
	}
	l.Session = (*st).Session
	l.Project = append(l.Project, (*st).Project)
	return Evaluate(call.Tool, l, external), nil
}

// sessionGrantsOf is whose "Always in this chat" answers hold for o: in
// a group, o's own, unless grants are shared; "" for anyone's.
func (c *Checker) sessionGrantsOf(o Origin) string {
	if o.Group && !c.shared.Load() {
		return o.User
	}
	return ""
}

// judges are the agents whose rules judge call: its own, then its
// callers', nearest first, each once.
func judges(call Call) []string {
	out := []string{call.AgentID}
	for i := len(call.Origin.Callers) - 1; i >= 0; i-- {
		if a := call.Origin.Callers[i].AgentID; !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// grantTarget is where the person's lasting answers for call live: the
// session and agent they were talking to (a subagent's root).
func grantTarget(call Call) (sessionID, agentID string) {
	if cs := call.Origin.Callers; len(cs) > 0 {
		return cs[0].SessionID, cs[0].AgentID
	}
	return call.SessionID, call.AgentID
}

// stricter reports whether a says less than b: deny over ask over allow,
// and a pinned ask over one a person may change.
func stricter(a, b Verdict) bool {
	rank := func(v Verdict) int {
		switch v.Decision {
		case Deny:
			return 2
		case Ask:
			return 1
		}
		return 0
	}
	if rank(a) != rank(b) {
		return rank(a) > rank(b)
	}
	return a.Pinned && !b.Pinned
}

// Check decides whether call may run: nil lets it run; a *DeniedError says
// why not. When the rules say ask, it asks through call.Origin and waits
// up to the ask timeout; if ctx ends meanwhile (the turn was stopped), it
// returns ctx's error.
func (c *Checker) Check(ctx context.Context, call Call) error {
	v, err := c.Verdict(ctx, call)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.opts.Log.ErrorContext(ctx, "permission rules unreadable; the call is denied", "tool", call.Tool, "session_id", call.SessionID, "error", err)
		return &DeniedError{Tool: call.Tool, Reason: "its permission rules could not be read just now (the operator's log has why); try again later", Cause: err}
	}
	switch v.Decision {
	case Allow:
		return nil
	case Deny:
		return &DeniedError{Tool: call.Tool, Reason: v.Why() + ", so it is not allowed here"}
	}
	return c.ask(ctx, call, v)
}

// ask puts the call to the person, or to an unattended run's config.
func (c *Checker) ask(ctx context.Context, call Call, v Verdict) error {
	o := call.Origin
	if u := o.Unattended; u != nil {
		if u.allows(call.Tool) {
			return nil
		}
		why := fmt.Sprintf("it needs a person's approval (%s), and nobody is there to ask in %s; "+
			"the operator can allow it with %s", v.Why(), u.What, u.Key)
		u.deny(call.Tool, why)
		return &DeniedError{Tool: call.Tool, Reason: why}
	}
	if o.Ask == nil {
		return &DeniedError{Tool: call.Tool, Reason: fmt.Sprintf("it needs a person's approval (%s), and nobody can be asked here", v.Why())}
	}
	choices := allChoices
	if v.Pinned {
		choices = pinnedChoices
	}
	timeout := c.AskTimeout()
	q := Question{ID: uuid.Must(uuid.NewV7()).String(), SessionID: call.SessionID, AgentID: call.AgentID, User: o.User,
		Tool: call.Tool, Arguments: call.Arguments, Choices: choices, Why: v.Why(), Expires: c.opts.Now().Add(timeout)}
	actx, cancel := context.WithTimeout(ctx, timeout)
	ans, err := o.Ask(actx, q)
	cancel()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return &DeniedError{Tool: call.Tool, Reason: fmt.Sprintf("nobody answered the request to use it within %s", timeout)}
	case errors.Is(err, ErrNoAnswerHere):
		return &DeniedError{Tool: call.Tool, Reason: fmt.Sprintf("it needs a person's approval (%s), and in a group on this channel nobody can give it "+
			"(answers are typed only in a direct chat); the person can ask for it in a direct chat with the bot", v.Why())}
	case err != nil:
		c.opts.Log.WarnContext(ctx, "asking for a tool's permission failed; the call is denied", "tool", call.Tool,
			"session_id", call.SessionID, "request_id", q.ID, "error", err)
		return &DeniedError{Tool: call.Tool, Reason: "the person could not be asked (the operator's log has why)", Cause: err}
	}
	return c.apply(ctx, call, q, ans)
}

// apply carries out an answer: it stores one that lasts, for the session
// and agent the person was talking to. A failure to store it still lets
// this call run: the person said yes.
func (c *Checker) apply(ctx context.Context, call Call, q Question, ans Answer) error {
	sessionID, agentID := grantTarget(call)
	if ans != Refuse && !slices.Contains(q.Choices, ans) {
		ans = AllowOnce // a lasting answer to a pinned ask allows this call only
	}
	var err error
	switch ans {
	case AllowOnce:
		return nil
	case AllowSession:
		if c.opts.Store != nil {
			err = c.opts.Store.GrantSession(context.WithoutCancel(ctx), sessionID, call.Tool, call.Origin.User)
		}
	case AllowAlways:
		if c.opts.Store != nil {
			err = c.opts.Store.GrantProject(context.WithoutCancel(ctx), agentID, call.Origin.User, call.Tool)
		}
	default:
		return &DeniedError{Tool: call.Tool, Reason: "the person asked said no"}
	}
	if err != nil {
		c.opts.Log.ErrorContext(ctx, "a lasting permission was not stored; it allows this call only", "tool", call.Tool,
			"session_id", call.SessionID, "answer", ans, "request_id", q.ID, "error", err)
	}
	return nil
}
