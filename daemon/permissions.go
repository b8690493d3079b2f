package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// closeTimeout bounds the edit that says how a question ended.
const closeTimeout = 10 * time.Second

// openPermissions builds the permission checker on the config's rules and
// the database's stored answers, and makes reg check every call with it.
func (d *Daemon) openPermissions(cfg *config.Config, reg *tools.Registry) error {
	pol, err := cfg.PermissionPolicy()
	if err != nil {
		return fmt.Errorf("permission rules: %w", err)
	}
	d.perms = permissions.NewChecker(permissions.Options{Policy: pol, Store: permissions.NewStore(d.db),
		AskTimeout: cfg.Permissions.AskTimeout.Std(), External: isMCPTool, SharedGroupGrants: cfg.Permissions.SharedGroupGrants, Log: d.named("permissions")})
	d.desk = permissions.NewDesk()
	reg.SetPermissions(d.perms)
	return nil
}

// isMCPTool says whether a tool is an MCP server's: those ask by default.
func isMCPTool(name string) bool { return strings.Contains(name, mcptools.Sep) }

// reloadPermissions puts a reloaded config's rules and ask timeout in place.
func (d *Daemon) reloadPermissions(cfg *config.Config) {
	if pol, err := cfg.PermissionPolicy(); err == nil {
		d.perms.SetPolicy(pol)
	}
	d.perms.SetAskTimeout(cfg.Permissions.AskTimeout.Std())
	d.perms.SetSharedGroupGrants(cfg.Permissions.SharedGroupGrants)
}

// permit says who a turn's tool calls are asked of, as the source of the
// message the turn answers declares: the person in their chat, the API's
// caller, the source's own policy for a run nobody watches (a cron job's
// or a webhook's allow_tools), or nobody.
func (d *Daemon) permit(req *agent.Request, in gateway.TurnInput) {
	last := in.Messages[len(in.Messages)-1]
	ad, _ := d.adapter(last.Adapter)
	src := adapters.SourceOf(ad)
	if src.Asks == adapters.AskPolicy {
		if src.Unattended != nil {
			req.Unattended = src.Unattended(last.ChatID)
		} else {
			req.Unattended = &permissions.Unattended{What: string(last.Adapter)}
		}
		return
	}
	req.User = last.Surface + ":" + last.UserID
	switch src.Asks {
	case adapters.AskCaller:
		req.Asker = apiAsker{d: d}
	case adapters.AskInChat:
		req.Asker = chatAsker{d: d, adapter: last.Adapter, chat: last.ChatID, replyTo: last.MessageID,
			name: last.DisplayName, group: last.Group}
	}
}

// cronUnattended is a cron fire's answerer: its job's allow_tools.
func (d *Daemon) cronUnattended(chatID string) *permissions.Unattended {
	jobID, _, _ := cron.ParseChatID(chatID)
	u := &permissions.Unattended{What: fmt.Sprintf("cron job %q", jobID),
		Key: "allow_tools on the job in the config (only jobs written in the config can allow tools)"}
	for i, j := range d.cfg().Cron.Jobs {
		if j.ID == jobID {
			u.Key, u.Allow = fmt.Sprintf("cron.jobs[%d].allow_tools", i), j.AllowTools
		}
	}
	return u
}

// deniedNotes are the lines a run nobody watched adds before its reply:
// each tool call it denied, and why, for the receipt and the notified.
func deniedNotes(u *permissions.Unattended) []string {
	if u == nil {
		return nil
	}
	var out []string
	for _, d := range u.Denied() {
		out = append(out, "Not run: "+d)
	}
	return out
}

// withNotes puts notes before text, even an empty one.
func withNotes(notes []string, text string) string {
	if len(notes) == 0 {
		return text
	}
	return strings.TrimSpace(strings.Join(notes, "\n") + "\n\n" + text)
}

// chatAsker asks in the chat the turn answers: buttons where the channel
// has them, else a numbered list the person answers with a number.
type chatAsker struct {
	d       *Daemon
	adapter adapters.ID
	chat    string
	replyTo string
	name    string // who is asked, as the chat shows them
	group   bool
}

// pressPrefix starts the data of a question's buttons: "perm:<id>:<answer>".
const pressPrefix = "perm:"

func (a chatAsker) Ask(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
	ad, ok := a.d.adapter(a.adapter)
	if !ok {
		return "", fmt.Errorf("channel %s is not running", a.adapter)
	}
	chooser, buttons := ad.(adapters.Chooser)
	if a.group && !buttons {
		return "", permissions.ErrNoAnswerHere
	}
	// A typed number answers only a question asked as a numbered list in
	// a direct chat: in a group, or under buttons, it is a message.
	var place permissions.Place
	if !buttons {
		place = permissions.Place{Adapter: string(a.adapter), Chat: a.chat}
	}
	p := a.d.desk.Open(q, place)
	defer a.d.desk.Close(p)
	text := q.Text()
	if a.group && a.name != "" {
		text = a.name + ": " + text
	}
	out := adapters.Outbound{Adapter: a.adapter, ChatID: a.chat, ReplyTo: a.replyTo}
	var messageID string
	if buttons {
		choices := make([]adapters.Choice, len(q.Choices))
		for i, c := range q.Choices {
			choices[i] = adapters.Choice{Label: c.Label(), Data: pressPrefix + q.ID + ":" + string(c)}
		}
		out.Text = text
		sent, err := chooser.SendChoices(ctx, out, choices)
		if err != nil {
			return "", fmt.Errorf("ask in %s: %w", a.adapter, err)
		}
		messageID = sent.MessageID
	} else {
		out.Text = q.Numbered()
		if _, err := ad.Send(ctx, out); err != nil {
			return "", fmt.Errorf("ask in %s: %w", a.adapter, err)
		}
	}
	ans, by, err := p.Wait(ctx)
	outcome := ans.Done()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		outcome = fmt.Sprintf("No answer within %s: not run.", a.d.perms.AskTimeout())
	case err != nil:
		outcome = "Stopped: not run."
	case a.group && by != "":
		outcome += " (" + a.name + ")"
	}
	// The question says how it ended, though the turn's context is over.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	var cerr error
	switch {
	case buttons:
		cerr = chooser.CloseChoices(cctx, a.chat, messageID, text+"\n"+outcome)
	case errors.Is(err, context.DeadlineExceeded):
		_, cerr = ad.Send(cctx, adapters.Outbound{Adapter: a.adapter, ChatID: a.chat, Text: q.Tool + ": " + outcome})
	}
	if cerr != nil {
		a.d.log.WarnContext(ctx, "could not say how a permission question ended", "adapter", a.adapter, "request_id", q.ID, "error", cerr)
	}
	return ans, err
}

// apiAsker waits for the API's answer: the question reaches the client as
// a permission.requested event.
type apiAsker struct{ d *Daemon }

func (a apiAsker) Ask(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
	p := a.d.desk.Open(q, permissions.Place{})
	defer a.d.desk.Close(p)
	ans, _, err := p.Wait(ctx)
	return ans, err
}

// apiPermissions answers questions for the API's route.
type apiPermissions struct{ d *Daemon }

var _ api.Permissions = apiPermissions{}

func (a apiPermissions) Answer(_ context.Context, id sessions.ID, requestID, answer string) (string, error) {
	ans, err := permissions.ParseAnswer(answer)
	if err != nil {
		return "", fmt.Errorf("%w: %v", api.ErrInvalid, err)
	}
	q, ok := a.d.desk.Question(requestID)
	if !ok || q.SessionID != string(id) {
		return "", fmt.Errorf("%w: no permission request %q waits in session %s (answered, expired, or never asked)", sessions.ErrNotFound, requestID, id)
	}
	switch _, err := a.d.desk.Answer(requestID, "", ans); {
	case errors.Is(err, permissions.ErrNotOffered):
		return "", fmt.Errorf("%w: %q is not offered for this request; answer with one of its choices", api.ErrInvalid, answer)
	case errors.Is(err, permissions.ErrNoRequest):
		return "", fmt.Errorf("%w: permission request %q was answered or expired meanwhile", sessions.ErrNotFound, requestID)
	case err != nil:
		return "", err
	}
	return q.Tool, nil
}

// channelSink is what the channels deliver to: the gateway, with the
// answers to permission questions taken out on the way, a press on a
// question's button or a numbered reply to its list.
type channelSink struct{ d *Daemon }

var (
	_ adapters.Sink      = channelSink{}
	_ adapters.PressSink = channelSink{}
)

// Deliver takes a numbered reply to a question waiting in the chat for
// its sender as the answer; anything else goes to the gateway.
func (s channelSink) Deliver(ctx context.Context, in adapters.Inbound) error {
	if s.d.desk != nil && s.d.desk.Waiting() > 0 {
		place := permissions.Place{Adapter: string(in.Adapter), Chat: in.ChatID}
		if q, a, ok := s.d.desk.AnswerNumber(place, in.Surface+":"+in.UserID, in.Text); ok {
			s.d.log.InfoContext(ctx, "permission answered", "adapter", in.Adapter, "chat_id", in.ChatID, "tool", q.Tool, "answer", a, "request_id", q.ID)
			return nil
		}
	}
	return s.d.gw.Deliver(ctx, in)
}

// DeliverWith is the gateway's, for the webhooks' record.
func (s channelSink) DeliverWith(ctx context.Context, in adapters.Inbound, also func(q dbutil.Querier) error) error {
	return s.d.gw.DeliverWith(ctx, in, also)
}

// Press answers the question whose button was pressed, if the presser is
// the person asked; the note says what happened.
func (s channelSink) Press(ctx context.Context, p adapters.Press) string {
	if note, ok := s.d.gw.Press(ctx, p); ok {
		return note // a command's button (/model, /think)
	}
	rest, ok := strings.CutPrefix(p.Data, pressPrefix)
	id, answer, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return "This button no longer does anything."
	}
	q, err := s.d.desk.Answer(id, p.Surface+":"+p.UserID, permissions.Answer(answer))
	switch {
	case errors.Is(err, permissions.ErrNotYours):
		return "Only the person who was asked can answer this."
	case errors.Is(err, permissions.ErrNoRequest):
		return "This question was already answered, or it expired."
	case err != nil:
		return "That answer isn't offered for this question."
	}
	s.d.log.InfoContext(ctx, "permission answered", "adapter", p.Adapter, "chat_id", p.ChatID, "tool", q.Tool, "answer", answer, "request_id", id)
	return permissions.Answer(answer).Done()
}
