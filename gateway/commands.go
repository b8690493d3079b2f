package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/commands"
	"github.com/parleyd/parley/sessions"
)

// chat is where a command typed in a chat runs: the gateway, for the
// message that carried it.
type chat struct {
	g  *Gateway
	j  job
	fx *effects
}

// effects are what a command asks of its reply beyond its text.
type effects struct {
	// choices go under the reply as buttons, where the channel has them.
	choices []adapters.Choice
	// rerun, when set, is the text the command's message is answered with
	// as a turn, in place of a reply (/retry).
	rerun *string
}

var _ commands.Runtime = chat{}

func (c chat) Stop(ctx context.Context) (string, error)    { return c.g.stop(ctx, c.j), nil }
func (c chat) Status(ctx context.Context) (string, error)  { return c.g.status(ctx, c.j), nil }
func (c chat) Reset(ctx context.Context) (string, error)   { return c.g.reset(ctx, c.j), nil }
func (c chat) Compact(ctx context.Context) (string, error) { return c.g.compact(ctx, c.j), nil }
func (c chat) Connect(ctx context.Context, provider string) (string, error) {
	return c.g.connect(ctx, c.j, provider), nil
}
func (c chat) Disconnect(ctx context.Context, provider string) (string, error) {
	return c.g.disconnect(ctx, c.j, provider), nil
}
func (c chat) Model(ctx context.Context, name string) (string, error) {
	return c.g.model(ctx, c.j, c.fx, name), nil
}
func (c chat) Think(ctx context.Context, level string) (string, error) {
	return c.g.think(ctx, c.j, c.fx, level), nil
}
func (c chat) Voice(ctx context.Context, setting string) (string, error) {
	return c.g.voice(ctx, c.j, setting), nil
}
func (c chat) Undo(ctx context.Context) (string, error) { return c.g.undo(ctx, c.j), nil }
func (c chat) Retry(ctx context.Context) (string, error) {
	return c.g.retry(ctx, c.j, c.fx), nil
}

// command dispatches a chat command: a barrier command takes its place on
// the lane, after what was sent before it; any other runs at once, outside
// the lane, so it works while a turn runs.
func (g *Gateway) command(ctx context.Context, j job, c commands.Command) {
	if c.Mode != commands.Barrier {
		g.runCommand(ctx, j, c.Name)
		return
	}
	if c.Interrupts {
		// A reset stops the running turn so it comes promptly; a
		// compaction waits for it.
		g.lanes.Abort(laneKey(j.key))
	}
	j.barrier = c.Name
	if _, err := g.lanes.EnqueueBarrier(laneKey(j.key), j); err != nil {
		g.opts.Log.WarnContext(ctx, "/"+c.Name+" left for the next start", "session_key", j.key.String(), "error", err)
	}
}

// runCommand runs the command named name and answers it.
func (g *Gateway) runCommand(ctx context.Context, j job, name string) {
	text := "/" + name + " is not available here."
	fx := &effects{}
	if c, arg, ok := commands.ParseArg(j.in.Text); ok && c.Name == name {
		var err error
		if text, err = c.Do(ctx, chat{g, j, fx}, arg); err != nil {
			_, text = g.failed(ctx, j.key, "/"+name, err, "Sorry, /"+name+" didn't work")
			fx = &effects{}
		}
	}
	if fx.rerun != nil {
		// Answered as a turn, from the text it names.
		r := j
		r.in.Text, r.in.Unattributed, r.in.Files = *fx.rerun, true, nil
		g.runTurn(ctx, []job{r}, nil)
		return
	}
	if len(fx.choices) > 0 && g.sendChoices(ctx, j, text, fx.choices) {
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, replyTo: j})
		return
	}
	g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, replyTo: j, text: text})
}

// stop aborts the session's running turn.
func (g *Gateway) stop(_ context.Context, j job) string {
	if g.lanes.Abort(laneKey(j.key)) {
		return "Stopped."
	}
	return "Nothing is running."
}

// status describes the session, its queue and its last failure.
func (g *Gateway) status(ctx context.Context, j job) string {
	var text string
	s, err := g.opts.Sessions.Active(ctx, j.key)
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		text = fmt.Sprintf("No conversation yet (%s, agent %s).", j.key, j.key.AgentID)
	case err != nil:
		_, text = g.failed(ctx, j.key, "read session for /status", err, "Sorry, I couldn't read this conversation's status")
	default:
		text = g.opts.Runner.Status(ctx, s, g.lanes.Depth(laneKey(j.key)))
	}
	if err == nil && text == "" {
		state := "idle"
		if g.lanes.Busy(laneKey(j.key)) {
			state = "busy"
		}
		text = fmt.Sprintf("Session %s, agent %s: %d messages, ~%d tokens; %d queued; %s.",
			j.key, j.key.AgentID, s.MessageCount, s.Rollup.TokenCount, g.lanes.Depth(laneKey(j.key)), state)
	}
	if err == nil || errors.Is(err, sessions.ErrNotFound) {
		text += g.statusFailureLine(j.key)
	}
	return text
}

// reset archives the session and starts a new one, between turns.
func (g *Gateway) reset(ctx context.Context, j job) string {
	if _, err := g.opts.Sessions.Reset(ctx, j.key); err != nil {
		_, text := g.failed(ctx, j.key, "reset session", err, "Sorry, I couldn't start a new conversation")
		return text
	}
	return "Started a new conversation."
}

// compact summarizes the session's older messages now, between turns.
func (g *Gateway) compact(ctx context.Context, j job) string {
	s, err := g.opts.Sessions.Active(ctx, j.key)
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		return "Nothing to compact yet."
	case err != nil:
		_, text := g.failed(ctx, j.key, "read session for /compact", err, "Sorry, I couldn't read this conversation")
		return text
	}
	text, err := g.opts.Runner.Compact(ctx, s, j.agent)
	if errors.Is(err, ErrNoCompaction) {
		return "Compaction is not available here."
	}
	if err != nil {
		_, text = g.failed(ctx, j.key, "compact session", err, "Sorry, I couldn't compact this conversation", "session_id", s.ID)
	}
	return text
}
