package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/textcut"
)

var _ adapters.Chooser = (*Adapter)(nil)

// callbackQuery is a press on an inline keyboard button.
type callbackQuery struct {
	ID      string         `json:"id"`
	From    *tgbotapi.User `json:"from"`
	Message *message       `json:"message,omitempty"`
	Data    string         `json:"data,omitempty"`
}

// buttonsPerRow lays the choices out two by two.
const buttonsPerRow = 2

// maxNote is the most characters answerCallbackQuery shows.
const maxNote = 200

// inlineKeyboard is reply_markup with a button per choice.
func inlineKeyboard(choices []adapters.Choice) (string, error) {
	type button struct {
		Text         string `json:"text"`
		CallbackData string `json:"callback_data"`
	}
	var rows [][]button
	for i, c := range choices {
		if c.Label == "" || c.Data == "" || len(c.Data) > adapters.MaxChoiceData {
			return "", fmt.Errorf("telegram: choice %d: a button needs a label and 1-%d bytes of data", i, adapters.MaxChoiceData)
		}
		if i%buttonsPerRow == 0 {
			rows = append(rows, nil)
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], button{Text: c.Label, CallbackData: c.Data})
	}
	b, err := json.Marshal(map[string]any{"inline_keyboard": rows})
	return string(b), err
}

// SendChoices implements adapters.Chooser: the text (cut to one message)
// with an inline keyboard, two buttons a row.
func (a *Adapter) SendChoices(ctx context.Context, out adapters.Outbound, choices []adapters.Choice) (adapters.Sent, error) {
	chat, thread, err := parseChatID(out.ChatID)
	if err != nil {
		return adapters.Sent{}, err
	}
	markup, err := inlineKeyboard(choices)
	if err != nil {
		return adapters.Sent{}, err
	}
	params := tgbotapi.Params{"chat_id": chat, "reply_markup": markup}
	params.AddNonZero("message_thread_id", thread)
	if out.ReplyTo != "" {
		params["reply_to_message_id"] = out.ReplyTo
		params["allow_sending_without_reply"] = "true"
	}
	raw, err := a.sendText(ctx, "sendMessage", params, oneMessage(out.Text))
	if err != nil {
		return adapters.Sent{}, err
	}
	var m tgbotapi.MessageID
	if err := json.Unmarshal(raw, &m); err != nil || m.MessageID == 0 {
		return adapters.Sent{}, fmt.Errorf("telegram sendMessage: the answer has no message_id")
	}
	return adapters.Sent{MessageID: strconv.Itoa(m.MessageID)}, nil
}

// CloseChoices implements adapters.Chooser: editMessageText, which takes
// the inline keyboard away; if the text is unchanged, editMessageReplyMarkup
// takes it away alone.
func (a *Adapter) CloseChoices(ctx context.Context, chatID, messageID, text string) error {
	chat, _, err := parseChatID(chatID)
	if err != nil {
		return err
	}
	_, err = a.sendText(ctx, "editMessageText", tgbotapi.Params{"chat_id": chat, "message_id": messageID}, oneMessage(text))
	var ae *APIError
	if errors.As(err, &ae) && strings.Contains(ae.Description, "message is not modified") {
		_, err = a.api.call(ctx, "editMessageReplyMarkup", tgbotapi.Params{"chat_id": chat, "message_id": messageID})
		if errors.As(err, &ae) && strings.Contains(ae.Description, "message is not modified") {
			return nil // no buttons left to take away
		}
	}
	return err
}

// oneMessage cuts text to what one message holds.
func oneMessage(text string) string {
	if utf16Len(text) <= MaxMessageLength {
		return text
	}
	return textcut.Runes(text, MaxMessageLength/2, "…")
}

// press hands a button press to the sink, if it takes presses, and
// answers the callback query with its note: Telegram shows the note to
// the person who pressed, and stops the button's spinner.
func (a *Adapter) press(ctx context.Context, sink adapters.Sink, q *callbackQuery) {
	note := "This button no longer does anything."
	if ps, ok := sink.(adapters.PressSink); ok && q.From != nil && q.Message != nil && q.Message.Chat != nil {
		note = ps.Press(ctx, adapters.Press{Adapter: a.id, Surface: Surface, ChatID: chatKey(q.Message.Chat.ID, q.Message),
			UserID: strconv.FormatInt(q.From.ID, 10), DisplayName: displayName(q.From),
			MessageID: strconv.Itoa(q.Message.MessageID), Data: q.Data,
			Group: q.Message.Chat.Type == "group" || q.Message.Chat.Type == "supergroup"})
	}
	params := tgbotapi.Params{"callback_query_id": q.ID}
	params.AddNonEmpty("text", textcut.Runes(note, maxNote, "…"))
	if _, err := a.api.call(ctx, "answerCallbackQuery", params); err != nil && ctx.Err() == nil {
		a.log.WarnContext(ctx, "telegram answerCallbackQuery failed; the button shows a spinner for a while", "error", err)
	}
}
