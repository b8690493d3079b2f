package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/textcut"
)

// sessionControl is what /model, /think, /undo, /retry and edits need of
// the sessions store beyond sessions.Store (the SQL store has it).
type sessionControl interface {
	Update(ctx context.Context, id sessions.ID, u sessions.Update) (sessions.Session, error)
	RewindFromOnce(ctx context.Context, id sessions.ID, from sessions.MessageID, key string) (sessions.RewindResult, error)
	RewoundBy(ctx context.Context, id sessions.ID, key string) (sessions.Message, bool, error)
}

// editBarrier is the barrier of an edited message: weighed on the lane,
// between turns.
const editBarrier = "\x00edit"

// metadataEffort is the session metadata key of its reasoning effort, as
// the agent reads it (agent.MetadataEffort).
const metadataEffort = "reasoning_effort"

func (g *Gateway) control() (sessionControl, bool) {
	c, ok := g.opts.Sessions.(sessionControl)
	return c, ok
}

// sessionSettings are a session's model and reasoning effort overrides.
func sessionSettings(meta json.RawMessage) (model, effort string) {
	var v struct {
		Model  string `json:"model"`
		Effort string `json:"reasoning_effort"`
	}
	_ = json.Unmarshal(meta, &v)
	return strings.TrimSpace(v.Model), strings.ToLower(strings.TrimSpace(v.Effort))
}

// settingsSession is j's active session, opened if there is none yet, so
// a setting chosen before the first message holds for it.
func (g *Gateway) settingsSession(ctx context.Context, j job) (sessions.Session, error) {
	agent := g.policies().agents[j.agent]
	s, _, err := g.opts.Sessions.Resolve(ctx, j.key, agent.Policy)
	return s, err
}

// model lists the agent's models (name "") or switches the session to one.
func (g *Gateway) model(ctx context.Context, j job, fx *effects, name string) string {
	agent := g.policies().agents[j.agent]
	ctl, ok := g.control()
	if !ok || len(agent.Models) == 0 {
		return "This conversation runs on its agent's own model; it allows no other."
	}
	current := agent.Models[0]
	if s, err := g.opts.Sessions.Active(ctx, j.key); err == nil {
		if m, _ := sessionSettings(s.Metadata); m != "" {
			current = m
		}
	}
	if name == "" {
		if len(agent.Models) == 1 {
			return fmt.Sprintf("This conversation runs on %s, the only model this agent allows (its config's agents[].models lists no others).", current)
		}
		var b strings.Builder
		b.WriteString("Models for this conversation:")
		for _, m := range agent.Models {
			b.WriteString("\n• " + m)
			if m == current {
				b.WriteString(" (in use)")
			}
			if data := adapters.CommandPrefix + "/model " + m; len(data) <= adapters.MaxChoiceData && fx != nil {
				label := m
				if m == current {
					label = "✓ " + m
				}
				fx.choices = append(fx.choices, adapters.Choice{Label: label, Data: data})
			}
		}
		b.WriteString("\nSwitch with /model <name>.")
		return b.String()
	}
	spec, ok := allowedModel(agent.Models, name)
	if !ok {
		return fmt.Sprintf("%q is not a model this agent allows; choose one of: %s. Nothing changed.", name, strings.Join(agent.Models, ", "))
	}
	s, err := g.settingsSession(ctx, j)
	if err != nil {
		_, text := g.failed(ctx, j.key, "open session for /model", err, "Sorry, I couldn't change the model")
		return text
	}
	override := spec
	if spec == agent.Models[0] {
		override = "" // the agent's own: no override to keep
	}
	if _, err := ctl.Update(ctx, s.ID, sessions.Update{Model: &override}); err != nil {
		_, text := g.failed(ctx, j.key, "set the session's model", err, "Sorry, I couldn't change the model", "session_id", s.ID)
		return text
	}
	return "From your next message on, this conversation runs on " + spec + "."
}

// allowedModel is the model of allowed that name names: the whole spec,
// or the name after its provider when only one has it, in any case.
func allowedModel(allowed []string, name string) (string, bool) {
	for _, m := range allowed {
		if strings.EqualFold(m, name) {
			return m, true
		}
	}
	var found []string
	for _, m := range allowed {
		if _, short, ok := strings.Cut(m, "/"); ok && strings.EqualFold(short, name) {
			found = append(found, m)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return "", false
}

// think shows (level "") or sets the session's reasoning effort.
func (g *Gateway) think(ctx context.Context, j job, fx *effects, level string) string {
	agent := g.policies().agents[j.agent]
	ctl, ok := g.control()
	if !ok {
		return "/think is not available here."
	}
	if level == "" {
		current := cmpOr(agent.Effort, "the provider's default")
		if s, err := g.opts.Sessions.Active(ctx, j.key); err == nil {
			if _, e := sessionSettings(s.Metadata); e != "" {
				current = e
			}
		}
		if fx != nil {
			for _, l := range []string{"off", "low", "medium", "high"} {
				label := l
				if l == current {
					label = "✓ " + l
				}
				fx.choices = append(fx.choices, adapters.Choice{Label: label, Data: adapters.CommandPrefix + "/think " + l})
			}
		}
		return "Thinking: " + current + ". Set it with /think off, low, medium or high."
	}
	s, err := g.settingsSession(ctx, j)
	if err != nil {
		_, text := g.failed(ctx, j.key, "open session for /think", err, "Sorry, I couldn't change the thinking level")
		return text
	}
	if _, err := ctl.Update(ctx, s.ID, sessions.Update{Metadata: json.RawMessage(`{"` + metadataEffort + `":"` + level + `"}`)}); err != nil {
		_, text := g.failed(ctx, j.key, "set the session's reasoning effort", err, "Sorry, I couldn't change the thinking level", "session_id", s.ID)
		return text
	}
	if level == "off" {
		return "Thinking is off from your next message on."
	}
	return "Thinking set to " + level + " from your next message on."
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// lastUserMessage is the latest live message a person sent in session id
// (ok false when there is none).
func (g *Gateway) lastUserMessage(ctx context.Context, id sessions.ID) (sessions.Message, bool, error) {
	msgs, err := g.opts.Sessions.Messages(ctx, id, sessions.MessagesOptions{})
	if err != nil {
		return sessions.Message{}, false, err
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i]; m.Role == sessions.RoleUser && !m.Synthetic && !m.Summary {
			return m, true, nil
		}
	}
	return sessions.Message{}, false, nil
}

// takeBack hides the session's last exchange, from its last message on,
// and returns that message; text is what to say instead when there is
// none or it failed. It does so once for j: run again after a crash, it
// returns the message its first run took back, and takes back no other.
func (g *Gateway) takeBack(ctx context.Context, j job, what string) (last sessions.Message, text string) {
	ctl, ok := g.control()
	if !ok {
		return sessions.Message{}, "/" + what + " is not available here."
	}
	s, err := g.opts.Sessions.Active(ctx, j.key)
	if errors.Is(err, sessions.ErrNotFound) {
		return sessions.Message{}, "Nothing to " + what + " yet."
	}
	var found bool
	if err == nil {
		last, found, err = ctl.RewoundBy(ctx, s.ID, j.inboundID)
		if found {
			return last, ""
		}
	}
	if err == nil {
		last, found, err = g.lastUserMessage(ctx, s.ID)
	}
	if err != nil {
		_, text := g.failed(ctx, j.key, "read session for /"+what, err, "Sorry, I couldn't read this conversation")
		return sessions.Message{}, text
	}
	if !found {
		return sessions.Message{}, "Nothing to " + what + " yet."
	}
	if _, err := ctl.RewindFromOnce(ctx, s.ID, last.ID, j.inboundID); err != nil {
		_, text := g.failed(ctx, j.key, "rewind for /"+what, err, "Sorry, /"+what+" didn't work", "session_id", s.ID)
		return sessions.Message{}, text
	}
	return last, ""
}

// undo takes back the last exchange.
func (g *Gateway) undo(ctx context.Context, j job) string {
	last, text := g.takeBack(ctx, j, "undo")
	if text != "" {
		return text
	}
	return fmt.Sprintf("Undone: %q and its answer are out of the conversation (kept in its history).", textcut.Runes(last.Content, 60, "…"))
}

// retry takes back the last exchange and has the command's message
// answered with the last message's text.
func (g *Gateway) retry(ctx context.Context, j job, fx *effects) string {
	last, text := g.takeBack(ctx, j, "retry")
	if text != "" {
		return text
	}
	if fx != nil {
		fx.rerun = &last.Content
	}
	return ""
}

// sendChoices sends text with buttons where j's channel has them, and
// reports whether it did; the reply is then not queued again.
func (g *Gateway) sendChoices(ctx context.Context, j job, text string, choices []adapters.Choice) bool {
	ad, ok := g.opts.Channels.Adapter(j.in.Adapter)
	if !ok {
		return false
	}
	ch, ok := ad.(adapters.Chooser)
	if !ok || adapters.SourceOf(ad).Replies != adapters.RepliesToChat {
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, choicesTimeout)
	defer cancel()
	if _, err := ch.SendChoices(sctx, adapters.Outbound{Adapter: j.in.Adapter, ChatID: j.in.ChatID, ReplyTo: j.in.MessageID, Text: text}, choices); err != nil {
		// The reply goes as text, through the outbox.
		g.opts.Log.WarnContext(ctx, "send a command's buttons; its reply goes as text", "adapter", j.in.Adapter, "chat_id", j.in.ChatID, "error", err)
		return false
	}
	return true
}

// choicesTimeout bounds sending a command's buttons.
const choicesTimeout = 15 * time.Second

// Press runs the chat command a button carries (adapters.CommandPrefix)
// as a message from the presser, through the access policy like any; ok
// is false for a button that carries none.
func (g *Gateway) Press(ctx context.Context, p adapters.Press) (note string, ok bool) {
	text, ok := strings.CutPrefix(p.Data, adapters.CommandPrefix)
	if !ok {
		return "", false
	}
	in := adapters.Inbound{Adapter: p.Adapter, Surface: p.Surface, ChatID: p.ChatID, UserID: p.UserID, DisplayName: p.DisplayName,
		Group: p.Group, Mentioned: p.Group, Text: text, Time: time.Now(),
		// Each press is its own message: pressing one button again runs it again.
		MessageID: "press:" + p.MessageID + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	if err := g.Deliver(ctx, in); err != nil {
		g.opts.Log.WarnContext(ctx, "run a button's command", "adapter", p.Adapter, "chat_id", p.ChatID, "error", err)
		return "That didn't work; type " + text + " instead.", true
	}
	return text, true
}

// queueEdit puts an edited message on its session's lane, as a barrier.
func (g *Gateway) queueEdit(ctx context.Context, j job) {
	if j.contextOnly {
		// A group edit not addressed to the bot changes nothing.
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, err: "edit not addressed to the bot", replyTo: j})
		return
	}
	j.barrier = editBarrier
	if _, err := g.lanes.EnqueueBarrier(laneKey(j.key), j); err != nil {
		g.opts.Log.WarnContext(ctx, "edit left for the next start", "session_key", j.key.String(), "error", err)
	}
}

// edit weighs an edited message: an edit of the session's latest message
// is answered again from its new text (the old exchange is kept, hidden);
// an edit of an older one is stored as an edit and noted, not answered;
// an edit of a message the session doesn't have changes nothing.
func (g *Gateway) edit(ctx context.Context, j job) {
	done := func(text, why string) {
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, err: why, replyTo: j, text: text})
	}
	ctl, ok := g.control()
	if !ok {
		done("", "edits are not available here")
		return
	}
	notHere := "I can't find the message you edited in this conversation, so nothing changed; send the new text as a new message if you want an answer."
	rec, err := g.opts.Store.InboundOf(ctx, j.in.Adapter, j.in.ChatID, j.in.Edits)
	if errors.Is(err, ErrNotFound) {
		done(notHere, "edit of an unknown message")
		return
	}
	s, serr := g.opts.Sessions.Active(ctx, j.key)
	if errors.Is(serr, sessions.ErrNotFound) || err == nil && serr == nil && rec.SessionID != string(s.ID) {
		done(notHere, "edit of a message of another session")
		return
	}
	var last sessions.Message
	var found, rewound bool
	if err == nil && serr == nil {
		// Run again after a crash: its rewind is made; answer it.
		_, rewound, err = ctl.RewoundBy(ctx, s.ID, j.inboundID)
	}
	if rewound {
		g.runTurn(ctx, []job{j}, nil)
		return
	}
	if err == nil && serr == nil {
		last, found, err = g.lastUserMessage(ctx, s.ID)
	}
	if err == nil {
		err = serr
	}
	if err != nil {
		_, text := g.failed(ctx, j.key, "weigh an edited message", err, "Sorry, I couldn't take your edit")
		done(text, err.Error())
		return
	}
	if found && string(last.ID) == rec.ID {
		if _, err := ctl.RewindFromOnce(ctx, s.ID, last.ID, j.inboundID); err != nil {
			_, text := g.failed(ctx, j.key, "rewind to an edited message", err, "Sorry, I couldn't take your edit", "session_id", s.ID)
			done(text, err.Error())
			return
		}
		g.runTurn(ctx, []job{j}, nil)
		return
	}
	// An older message: kept as an edit, for context, with no turn.
	note := sessions.Message{ID: sessions.MessageID(j.inboundID), Role: sessions.RoleUser, Synthetic: true,
		Content: "(edited an earlier message to:) " + j.in.Attributed()}
	if _, err := g.opts.Sessions.Append(ctx, s.ID, note); err != nil {
		_, text := g.failed(ctx, j.key, "store an edit", err, "Sorry, I couldn't take your edit", "session_id", s.ID)
		done(text, err.Error())
		return
	}
	g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, session: s.ID, replyTo: j,
		text: "Noted your edit of an earlier message. I answer again only an edit of your latest message; send a new message if you want an answer to this one."})
}

// metadataVoice is the session metadata key of /voice (turns.MetadataVoice).
const metadataVoice = "voice"

// voice shows or sets whether the session's replies are spoken.
func (g *Gateway) voice(ctx context.Context, j job, setting string) string {
	ctl, ok := g.control()
	if !ok {
		return "/voice is not available here."
	}
	if setting == "" {
		current := "as this agent is set up"
		if s, err := g.opts.Sessions.Active(ctx, j.key); err == nil {
			var meta map[string]any
			if json.Unmarshal(s.Metadata, &meta) == nil {
				if v, ok := meta[metadataVoice].(string); ok && (v == "on" || v == "off") {
					current = v
				}
			}
		}
		return "Spoken replies: " + current + ". Set them with /voice on or /voice off."
	}
	s, err := g.settingsSession(ctx, j)
	if err != nil {
		_, text := g.failed(ctx, j.key, "open session for /voice", err, "Sorry, I couldn't change spoken replies")
		return text
	}
	if _, err := ctl.Update(ctx, s.ID, sessions.Update{Metadata: json.RawMessage(`{"` + metadataVoice + `":"` + setting + `"}`)}); err != nil {
		_, text := g.failed(ctx, j.key, "set the session's spoken replies", err, "Sorry, I couldn't change spoken replies", "session_id", s.ID)
		return text
	}
	if setting == "off" {
		return "Spoken replies are off from your next message on."
	}
	if !g.opts.Speaks {
		return "Spoken replies are on, but no speech provider is set up (the speech section of parley's config), so replies stay text until the operator adds one."
	}
	return "Spoken replies are on from your next message on: I'll answer with voice notes."
}
