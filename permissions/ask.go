package permissions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Answer is a person's answer to a Question.
type Answer string

// The answers, in the order they are offered.
const (
	// AllowOnce runs this call.
	AllowOnce Answer = "once"
	// AllowSession runs it and every later call of the tool in this
	// session ("Always in this chat").
	AllowSession Answer = "session"
	// AllowAlways runs it and every later call of the tool by this agent
	// for this person, in any chat ("Always").
	AllowAlways Answer = "always"
	// Refuse denies this call.
	Refuse Answer = "deny"
)

// Label is how a choice reads on a button or in a numbered list.
func (a Answer) Label() string {
	switch a {
	case AllowOnce:
		return "Allow once"
	case AllowSession:
		return "Always in this chat"
	case AllowAlways:
		return "Always"
	case Refuse:
		return "Deny"
	}
	return string(a)
}

// Done says what was decided, for the question's message once answered
// ("Allowed once").
func (a Answer) Done() string {
	switch a {
	case AllowOnce:
		return "Allowed once"
	case AllowSession:
		return "Allowed in this chat from now on"
	case AllowAlways:
		return "Allowed from now on"
	case Refuse:
		return "Denied"
	}
	return string(a)
}

// ParseAnswer reads an answer as the API takes it ("once", "session",
// "always", "deny").
func ParseAnswer(s string) (Answer, error) {
	switch a := Answer(strings.ToLower(strings.TrimSpace(s))); a {
	case AllowOnce, AllowSession, AllowAlways, Refuse:
		return a, nil
	}
	return "", fmt.Errorf("%q is not an answer; use once, session, always or deny", s)
}

// allChoices are the answers offered for a rule a person may change.
var allChoices = []Answer{AllowOnce, AllowSession, AllowAlways, Refuse}

// pinnedChoices are offered for a pinned ask: it asks every time.
var pinnedChoices = []Answer{AllowOnce, Refuse}

// Question asks whether one tool call may run.
type Question struct {
	// ID names the question: the API's request id, a button's data.
	ID        string
	SessionID string
	AgentID   string
	// User is who is asked: the person the turn answers.
	User string
	Tool string
	// Arguments are the call's arguments, as the model wrote them.
	Arguments json.RawMessage
	// Choices are the answers offered, in order.
	Choices []Answer
	// Why is what made it ask.
	Why string
	// Expires is when no answer denies.
	Expires time.Time
}

// maxArgsShown caps the arguments a question shows.
const maxArgsShown = 300

// Text is the question as a chat shows it, without the choices.
func (q Question) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "The assistant wants to use the tool %s", q.Tool)
	if args := compactArgs(q.Arguments); args != "" && args != "{}" {
		fmt.Fprintf(&b, " with %s", args)
	}
	b.WriteString(". Allow it?")
	return b.String()
}

// Numbered is the question with its choices as a numbered list, for a
// channel without buttons: the person answers with the number.
func (q Question) Numbered() string {
	var b strings.Builder
	b.WriteString(q.Text())
	b.WriteString("\nReply with a number:")
	for i, c := range q.Choices {
		fmt.Fprintf(&b, "\n%d. %s", i+1, c.Label())
	}
	return b.String()
}

// compactArgs is the arguments on one line, cut to maxArgsShown.
func compactArgs(args json.RawMessage) string {
	var v any
	s := strings.TrimSpace(string(args))
	if json.Unmarshal(args, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			s = string(b)
		}
	}
	if r := []rune(s); len(r) > maxArgsShown {
		s = string(r[:maxArgsShown]) + "…"
	}
	return s
}

// AskFunc puts a question to the person and returns the answer. It
// returns when the person answers, or with ctx's error when ctx ends (the
// ask timed out, or the turn was stopped).
type AskFunc func(ctx context.Context, q Question) (Answer, error)

// Origin is who stands behind a call: the person the turn answers (their
// "always" answers apply) and how to ask them.
type Origin struct {
	// User is the person, "<surface>:<user id>"; in a group, the one who
	// addressed the bot.
	User string
	// Ask asks them; nil means nobody can be asked.
	Ask AskFunc
	// Unattended is set for a run nobody watches: its config answers.
	Unattended *Unattended
	// Group says the person is one of several in the chat: their "Always
	// in this chat" holds for them only, unless the checker shares
	// group grants.
	Group bool
	// Callers are the turns a subagent's turn was spawned from, the root
	// first: the chat the person is in. A subagent's call is judged by
	// its own agent's rules and by each caller's, the strictest winning,
	// and the person's lasting answers are read from and stored for the
	// root, the agent and chat they were talking to. Empty for a turn a
	// person or a job started.
	Callers []Caller
}

// Caller is one turn above a subagent's: its agent and session.
type Caller struct {
	AgentID   string
	SessionID string
}

// Unattended answers for a run nobody watches, a cron job or a webhook:
// the tools its config allows run; any other ask is denied, saying why.
type Unattended struct {
	// What names the run, e.g. `cron job "nightly"`.
	What string
	// Key is the config key that allows tools, e.g. "cron.jobs[0].allow_tools".
	Key string
	// Allow lists the tools (names or patterns) it allows.
	Allow []string

	mu     sync.Mutex
	denied []string
}

// Denied lists the calls denied so far for want of an answer, each as
// "<tool>: <why>", for the run's receipt.
func (u *Unattended) Denied() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.denied)
}

func (u *Unattended) deny(tool, why string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.denied = append(u.denied, tool+": "+why)
}

// allows reports whether the run's config allows tool.
func (u *Unattended) allows(tool string) bool {
	for _, a := range u.Allow {
		if p, err := compilePattern(a); err == nil && p.match(tool) {
			return true
		}
	}
	return false
}

// DeniedError is the result of a call the rules or the person did not let
// run: the model reads it, and the turn goes on.
type DeniedError struct {
	Tool string
	// Reason says why, in words the model and the operator both read.
	Reason string
	// Cause is an underlying failure (asking failed), for the log only.
	Cause error
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("permission denied: %s did not run: %s. Don't call it again in this turn; answer without it, or say what you would need", e.Tool, e.Reason)
}

// Unwrap gives ErrDenied and the cause.
func (e *DeniedError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrDenied, e.Cause}
	}
	return []error{ErrDenied}
}
