package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/textcut"
)

var _ adapters.Chooser = (*Adapter)(nil)

// Discord's limits on buttons: five to an action row, a label of 80
// characters, a custom_id of 100.
const (
	buttonsPerRow = 5
	maxLabel      = 80
	maxCustomID   = 100
)

// component is a message component as Discord takes it: an action row
// (type 1) of buttons (type 2).
type component struct {
	Type       int         `json:"type"`
	Components []component `json:"components,omitempty"`
	Style      int         `json:"style,omitempty"`
	Label      string      `json:"label,omitempty"`
	CustomID   string      `json:"custom_id,omitempty"`
}

// buttonRows lays the choices out as buttons, the first one primary.
func buttonRows(choices []adapters.Choice) ([]component, error) {
	var rows []component
	for i, c := range choices {
		if c.Label == "" || c.Data == "" || len(c.Data) > maxCustomID {
			return nil, fmt.Errorf("discord: choice %d: a button needs a label and 1-%d bytes of data", i, maxCustomID)
		}
		if i%buttonsPerRow == 0 {
			rows = append(rows, component{Type: int(discordgo.ActionsRowComponent)})
		}
		style := discordgo.SecondaryButton
		if i == 0 {
			style = discordgo.PrimaryButton
		}
		row := &rows[len(rows)-1]
		row.Components = append(row.Components, component{Type: int(discordgo.ButtonComponent), Style: int(style),
			Label: textcut.Runes(c.Label, maxLabel, "…"), CustomID: c.Data})
	}
	return rows, nil
}

// choicesMessage is createMessage with buttons.
type choicesMessage struct {
	createMessage
	Components []component `json:"components"`
}

// SendChoices implements adapters.Chooser: the text (cut to one message)
// with a button for each choice.
func (a *Adapter) SendChoices(ctx context.Context, out adapters.Outbound, choices []adapters.Choice) (adapters.Sent, error) {
	if err := checkID("chat id", out.ChatID); err != nil {
		return adapters.Sent{}, err
	}
	rows, err := buttonRows(choices)
	if err != nil {
		return adapters.Sent{}, err
	}
	text := textcut.Runes(out.Text, MaxMessageLength, "…")
	if err := checkText(text); err != nil {
		return adapters.Sent{}, err
	}
	body := choicesMessage{createMessage: createMessage{Content: text, AllowedMentions: allowedMentions}, Components: rows}
	if out.ReplyTo != "" && checkID("reply_to message id", out.ReplyTo) == nil {
		no := false
		body.MessageReference = &discordgo.MessageReference{MessageID: out.ReplyTo, ChannelID: out.ChatID, FailIfNotExists: &no}
	}
	return a.postMessage(ctx, out.ChatID, body)
}

// CloseChoices implements adapters.Chooser: it edits the message's text
// and takes its buttons away.
func (a *Adapter) CloseChoices(ctx context.Context, chatID, messageID, text string) error {
	if err := checkMessageIDs(chatID, messageID); err != nil {
		return err
	}
	e := discordgo.NewMessageEdit(chatID, messageID).SetContent(textcut.Runes(text, MaxMessageLength, "…"))
	e.Components = &[]discordgo.MessageComponent{}
	e.AllowedMentions = allowedMentions
	if _, err := a.s.ChannelMessageEditComplex(e, discordgo.WithContext(ctx)); err != nil {
		return a.apiError("edit message", err)
	}
	return nil
}

// onInteraction takes a press on a button: it goes to the sink's
// PressSink, and the note it returns answers the interaction, shown to
// the presser alone. It runs in the read loop, so the rest runs apart.
func (a *Adapter) onInteraction(ctx context.Context, sink adapters.Sink, i *discordgo.InteractionCreate) {
	if i.Interaction == nil || i.Type != discordgo.InteractionMessageComponent {
		return
	}
	user := i.User
	if i.Member != nil && i.Member.User != nil {
		user = i.Member.User
	}
	press := adapters.Press{Adapter: a.id, Surface: Surface, ChatID: i.ChannelID, Data: i.MessageComponentData().CustomID, Group: i.GuildID != ""}
	if i.Message != nil {
		press.MessageID = i.Message.ID
	}
	if user != nil {
		press.UserID = user.ID
		press.DisplayName = user.GlobalName
		if press.DisplayName == "" {
			press.DisplayName = user.Username
		}
	}
	if i.Member != nil && i.Member.Nick != "" {
		press.DisplayName = i.Member.Nick
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		note := "This button no longer does anything."
		if ps, ok := sink.(adapters.PressSink); ok && press.UserID != "" {
			note = ps.Press(ctx, press)
		}
		err := a.s.InteractionRespond(i.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: note, Flags: discordgo.MessageFlagsEphemeral},
		}, discordgo.WithContext(ctx))
		if err != nil && ctx.Err() == nil {
			a.log.WarnContext(ctx, "discord interaction not answered; the button shows it failed", "error", a.apiError("interaction response", err))
		}
	}()
}
