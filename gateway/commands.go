package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyd/parley/sessions"
)

// Command recognises the in-channel commands: /reset (or /new), /stop,
// /status and /compact, alone on the message, with an optional @botname
// suffix. It returns the command's name without the slash.
func Command(text string) (string, bool) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "/") || strings.ContainsAny(t, " \n\t") {
		return "", false
	}
	name, _, _ := strings.Cut(t[1:], "@")
	switch strings.ToLower(name) {
	case "reset", "new":
		return "reset", true
	case "stop":
		return "stop", true
	case "status":
		return "status", true
	case "compact":
		return "compact", true
	}
	return "", false
}

// runCommand answers /stop and /status at once, outside the lane, so they
// work while a turn runs. (/reset and /compact run on the lane; see
// dispatch.)
func (g *Gateway) runCommand(ctx context.Context, j job, cmd string) {
	var text string
	switch cmd {
	case "stop":
		if g.lanes.Abort(laneKey(j.key)) {
			text = "Stopped."
		} else {
			text = "Nothing is running."
		}
	case "status":
		s, err := g.opts.Sessions.Active(ctx, j.key)
		switch {
		case errors.Is(err, sessions.ErrNotFound):
			text = fmt.Sprintf("No conversation yet (%s, agent %s).", j.key, j.key.AgentID)
		case err != nil:
			_, text = g.failed(ctx, j.key, "read session for /status", err, "Sorry, I couldn't read this conversation's status")
		case g.opts.Status != nil:
			text = g.opts.Status(ctx, s, g.lanes.Depth(laneKey(j.key)))
		default:
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
	}
	g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, replyTo: j, text: text})
}
