package turns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/permissions"
)

// closeTimeout bounds the edit that says how a question ended.
const closeTimeout = 10 * time.Second

// permit says who a turn's tool calls are asked of, as the source of the
// message the turn answers declares: the person in their chat, the API's
// caller, the source's own policy for a run nobody watches (a cron job's
// or a webhook's allow_tools), or nobody.
func (b *Bridge) permit(req *agent.Request, in gateway.TurnInput) {
	last := in.Messages[len(in.Messages)-1]
	ad, _ := b.adapter(last.Adapter)
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
		req.Asker = apiAsker{b: b}
	case adapters.AskInChat:
		req.Asker = chatAsker{b: b, adapter: last.Adapter, chat: last.ChatID, replyTo: last.MessageID,
			name: last.DisplayName, group: last.Group}
	}
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
	b       *Bridge
	adapter adapters.ID
	chat    string
	replyTo string
	name    string // who is asked, as the chat shows them
	group   bool
}

// PressPrefix starts the data of a question's buttons: "perm:<id>:<answer>".
const PressPrefix = "perm:"

func (a chatAsker) Ask(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
	ad, ok := a.b.adapter(a.adapter)
	if !ok {
		return "", fmt.Errorf("channel %s is not running", a.adapter)
	}
	chooser := a.b.capabilities(a.adapter).Choices
	buttons := chooser != nil
	if a.group && !buttons {
		return "", permissions.ErrNoAnswerHere
	}
	// A typed number answers only a question asked as a numbered list in
	// a direct chat: in a group, or under buttons, it is a message.
	var place permissions.Place
	if !buttons {
		place = permissions.Place{Adapter: string(a.adapter), Chat: a.chat}
	}
	p := a.b.desk.Open(q, place)
	defer a.b.desk.Close(p)
	text := q.Text()
	if a.group && a.name != "" {
		text = a.name + ": " + text
	}
	out := adapters.Outbound{Adapter: a.adapter, ChatID: a.chat, ReplyTo: a.replyTo}
	var messageID string
	if buttons {
		choices := make([]adapters.Choice, len(q.Choices))
		for i, c := range q.Choices {
			choices[i] = adapters.Choice{Label: c.Label(), Data: PressPrefix + q.ID + ":" + string(c)}
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
		outcome = fmt.Sprintf("No answer within %s: not run.", a.b.perms.AskTimeout())
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
		a.b.log.WarnContext(ctx, "could not say how a permission question ended", "adapter", a.adapter, "request_id", q.ID, "error", cerr)
	}
	return ans, err
}

// apiAsker waits for the API's answer: the question reaches the client as
// a permission.requested event.
type apiAsker struct{ b *Bridge }

func (a apiAsker) Ask(ctx context.Context, q permissions.Question) (permissions.Answer, error) {
	p := a.b.desk.Open(q, permissions.Place{})
	defer a.b.desk.Close(p)
	ans, _, err := p.Wait(ctx)
	return ans, err
}
