package permissions

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil/dbtest"
)

// asker answers every question with a, counting them.
func asker(a Answer, asked *atomic.Int32) AskFunc {
	return func(ctx context.Context, q Question) (Answer, error) {
		asked.Add(1)
		return a, nil
	}
}

// A person's answer decides the call, and the answers that last make the
// next call run without asking: in the session ("always in this chat")
// or for the user everywhere ("always"); another chat is still asked.
func TestCheckerAsksAndRemembers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		s1, s2 := newSession(t, db, "1"), newSession(t, db, "2")
		c := NewChecker(Options{Store: NewStore(db)})
		var asked atomic.Int32
		call := func(session, user, tool string, a AskFunc) error {
			return c.Check(ctx, Call{Tool: tool, SessionID: session, AgentID: "a", Origin: Origin{User: user, Ask: a}})
		}

		// parley's own tools run unasked.
		if err := call(s1, "telegram:1", "memory_write", asker(Refuse, &asked)); err != nil || asked.Load() != 0 {
			t.Fatalf("own tool: %v, asked %d", err, asked.Load())
		}
		// Deny: the call does not run, and the model is told why.
		err := call(s1, "telegram:1", "gh__list", asker(Refuse, &asked))
		var de *DeniedError
		if !errors.As(err, &de) || !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "said no") || asked.Load() != 1 {
			t.Fatalf("denied: %v, asked %d", err, asked.Load())
		}
		// Once: runs, and the next call asks again.
		if err := call(s1, "telegram:1", "gh__list", asker(AllowOnce, &asked)); err != nil {
			t.Fatal(err)
		}
		if err := call(s1, "telegram:1", "gh__list", asker(AllowSession, &asked)); err != nil || asked.Load() != 3 {
			t.Fatalf("after once, asked %d times: %v", asked.Load(), err)
		}
		// Always in this chat: no more questions in session 1, for anyone.
		if err := call(s1, "telegram:9", "gh__list", asker(Refuse, &asked)); err != nil || asked.Load() != 3 {
			t.Fatalf("in the session allowed: asked %d, %v", asked.Load(), err)
		}
		// Another chat is still asked.
		if err := call(s2, "telegram:2", "gh__list", asker(AllowAlways, &asked)); err != nil || asked.Load() != 4 {
			t.Fatalf("another chat: asked %d, %v", asked.Load(), err)
		}
		// Always: user 2 isn't asked again, even in another session.
		if err := call(s1, "telegram:2", "gh__list", asker(Refuse, &asked)); err != nil || asked.Load() != 4 {
			t.Fatalf("always for user 2: asked %d, %v", asked.Load(), err)
		}
		s3 := newSession(t, db, "3")
		if err := call(s3, "telegram:2", "gh__list", asker(Refuse, &asked)); err != nil || asked.Load() != 4 {
			t.Fatalf("always for user 2, new session: asked %d, %v", asked.Load(), err)
		}
		// ...but user 3 is.
		if err := call(s3, "telegram:3", "gh__list", asker(Refuse, &asked)); err == nil || asked.Load() != 5 {
			t.Fatalf("user 3: asked %d, %v", asked.Load(), err)
		}
	})
}

// A pinned ask offers only "Allow once" and "Deny", and asks every time,
// whatever was answered before; a pinned deny never asks.
func TestCheckerPinned(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newSession(t, db, "1")
	pol, err := NewPolicy(map[string][]Rule{"a": {pinned("shell__*", Ask), pinned("gh__delete", Deny)}},
		[]ProjectRule{{Agent: "a", Rule: r("gh__delete", Allow)}})
	if err != nil {
		t.Fatal(err)
	}
	c := NewChecker(Options{Store: NewStore(db), Policy: pol})
	var offered [][]Answer
	ask := func(ctx context.Context, q Question) (Answer, error) {
		offered = append(offered, q.Choices)
		return AllowAlways, nil // not offered: counts as once
	}
	for range 2 {
		if err := c.Check(context.Background(), Call{Tool: "shell__run", SessionID: s, AgentID: "a", Origin: Origin{User: "u", Ask: ask}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(offered) != 2 || len(offered[0]) != 2 || offered[0][0] != AllowOnce || offered[0][1] != Refuse {
		t.Fatalf("offered %v", offered)
	}
	err = c.Check(context.Background(), Call{Tool: "gh__delete", SessionID: s, AgentID: "a", Origin: Origin{User: "u", Ask: ask}})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "pinned") || len(offered) != 2 {
		t.Fatalf("pinned deny: %v (asked %d times)", err, len(offered))
	}
}

// No answer within the ask timeout denies, saying so; a turn stopped
// while it waits gets its context's error; asking that fails denies.
func TestCheckerTimeoutAndStop(t *testing.T) {
	c := NewChecker(Options{AskTimeout: 50 * time.Millisecond})
	wait := func(ctx context.Context, q Question) (Answer, error) {
		if time.Until(q.Expires) > time.Second {
			t.Errorf("expires %s from now; the timeout is 50ms", time.Until(q.Expires))
		}
		<-ctx.Done()
		return "", ctx.Err()
	}
	err := c.Check(context.Background(), Call{Tool: "gh__list", SessionID: "s", AgentID: "a", Origin: Origin{User: "u", Ask: wait}})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "nobody answered") || !strings.Contains(err.Error(), "50ms") {
		t.Fatalf("timeout: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() { <-started; cancel() }()
	c = NewChecker(Options{AskTimeout: time.Hour})
	err = c.Check(ctx, Call{Tool: "gh__list", AgentID: "a", Origin: Origin{User: "u", Ask: func(ctx context.Context, q Question) (Answer, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}}})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrDenied) {
		t.Fatalf("stopped: %v", err)
	}

	boom := errors.New("send failed: host db.internal:5432")
	err = c.Check(context.Background(), Call{Tool: "gh__list", AgentID: "a", Origin: Origin{User: "u", Ask: func(context.Context, Question) (Answer, error) { return "", boom }}})
	if !errors.Is(err, ErrDenied) || !errors.Is(err, boom) || strings.Contains(err.Error(), "db.internal") {
		t.Fatalf("asking failed: %v", err)
	}
}

// Nobody to ask: an ask denies, unless the unattended run's config allows
// the tool; the denial names the config key that would.
func TestCheckerUnattended(t *testing.T) {
	c := NewChecker(Options{})
	u := &Unattended{What: `cron job "nightly"`, Key: "cron.jobs[0].allow_tools", Allow: []string{"gh__list", "mcp:fs"}}
	for _, tc := range []struct {
		tool string
		ok   bool
	}{{"gh__list", true}, {"fs__read", true}, {"gh__delete", false}, {"memory_write", true}} {
		err := c.Check(context.Background(), Call{Tool: tc.tool, AgentID: "a", Origin: Origin{Unattended: u}})
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.tool, err)
		}
		if err != nil && (!strings.Contains(err.Error(), `cron job "nightly"`) || !strings.Contains(err.Error(), "cron.jobs[0].allow_tools")) {
			t.Errorf("%s: the denial doesn't say why: %v", tc.tool, err)
		}
	}
	if d := u.Denied(); len(d) != 1 || !strings.HasPrefix(d[0], "gh__delete: it needs a person's approval") {
		t.Errorf("denied %q", d)
	}
	err := c.Check(context.Background(), Call{Tool: "gh__list", AgentID: "a"})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "nobody can be asked") {
		t.Fatalf("no origin: %v", err)
	}
}

// A subagent's call is judged by its own agent's rules and by its
// callers', the strictest winning; the person's lasting answers are read
// and stored for the root: the agent and chat they were talking to.
func TestSubagentCallJudgedByItsCallers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		root, child := newSession(t, db, "1"), newSession(t, db, "2")
		pol, err := NewPolicy(map[string][]Rule{
			"private": {{Tool: "priv__*", Decision: Allow}, {Tool: "memory_write", Decision: Allow}},
			"public":  {{Tool: "memory_write", Decision: Deny}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		st := NewStore(db)
		c := NewChecker(Options{Policy: pol, Store: st})
		var asked atomic.Int32
		sub := func(tool string, a AskFunc) error {
			return c.Check(ctx, Call{Tool: tool, SessionID: child, AgentID: "private", Origin: Origin{User: "telegram:7", Ask: a,
				Callers: []Caller{{AgentID: "public", SessionID: root}}}})
		}
		// The private agent allows its tool, the caller's chat would ask:
		// the person is asked.
		if err := sub("priv__secret", asker(AllowAlways, &asked)); err != nil || asked.Load() != 1 {
			t.Fatalf("the caller's ask: %v, asked %d", err, asked.Load())
		}
		// The caller denies: so does its subagent, though its own rules allow.
		if err := sub("memory_write", asker(AllowOnce, &asked)); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "agent public") {
			t.Fatalf("the caller's deny: %v", err)
		}
		// "Always" is stored for the agent the person talked to.
		gs, err := st.ProjectGrants(ctx, "", "")
		if err != nil || len(gs) != 1 || gs[0].Agent != "public" || gs[0].Tool != "priv__secret" || gs[0].User != "telegram:7" {
			t.Fatalf("grants %+v, %v", gs, err)
		}
		// And it holds for the next subagent call, unasked.
		if err := sub("priv__secret", asker(Refuse, &asked)); err != nil || asked.Load() != 1 {
			t.Fatalf("after always: %v, asked %d", err, asked.Load())
		}
		// "Always in this chat" goes to the root's session.
		if err := sub("priv__other", asker(AllowSession, &asked)); err != nil || asked.Load() != 2 {
			t.Fatalf("session answer: %v, asked %d", err, asked.Load())
		}
		if g, err := st.Grants(ctx, root, "public", "telegram:7", ""); err != nil || g.Session.Len() != 1 {
			t.Fatalf("root's session grants: %+v, %v", g, err)
		}
		if g, err := st.Grants(ctx, child, "private", "telegram:7", ""); err != nil || g.Session.Len()+g.Project.Len() != 0 {
			t.Fatalf("the subagent's own grants: %+v, %v", g, err)
		}
	})
}

// In a group, "Always in this chat" holds for the member who answered,
// not for every member, and a second member's answer doesn't take the
// first one's away; the operator may share them (shared_group_grants).
// A question nobody can answer where the turn is (a group on a channel
// without buttons) denies the call, saying where to ask.
func TestGroupSessionGrantsArePerPerson(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		s := newSession(t, db, "g")
		c := NewChecker(Options{Store: NewStore(db)})
		var asked atomic.Int32
		call := func(user string, a AskFunc) error {
			return c.Check(ctx, Call{Tool: "gh__list", SessionID: s, AgentID: "a", Origin: Origin{User: user, Ask: a, Group: true}})
		}
		if err := call("telegram:1", asker(AllowSession, &asked)); err != nil || asked.Load() != 1 {
			t.Fatalf("first member: %v, asked %d", err, asked.Load())
		}
		if err := call("telegram:1", asker(Refuse, &asked)); err != nil || asked.Load() != 1 {
			t.Fatalf("first member again: %v, asked %d", err, asked.Load())
		}
		// Another member is asked; their answer is theirs.
		if err := call("telegram:2", asker(AllowSession, &asked)); err != nil || asked.Load() != 2 {
			t.Fatalf("second member: %v, asked %d", err, asked.Load())
		}
		if err := call("telegram:1", asker(Refuse, &asked)); err != nil || asked.Load() != 2 {
			t.Fatalf("the first member's answer after the second's: %v, asked %d", err, asked.Load())
		}
		if err := call("telegram:3", asker(Refuse, &asked)); !errors.Is(err, ErrDenied) || asked.Load() != 3 {
			t.Fatalf("third member: %v, asked %d", err, asked.Load())
		}
		c.SetSharedGroupGrants(true)
		if err := call("telegram:3", asker(Refuse, &asked)); err != nil || asked.Load() != 3 {
			t.Fatalf("shared grants: %v, asked %d", err, asked.Load())
		}
		nowhere := func(context.Context, Question) (Answer, error) { return "", ErrNoAnswerHere }
		err := c.Check(ctx, Call{Tool: "gh__other", SessionID: s, AgentID: "a", Origin: Origin{User: "telegram:1", Ask: nowhere, Group: true}})
		if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "direct chat") {
			t.Fatalf("a question nobody can answer: %v", err)
		}
	})
}
