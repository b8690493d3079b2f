package telegram

import (
	"context"
	"encoding/json"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/adapters"
)

var _ adapters.Reactor = (*Adapter)(nil)

// React implements adapters.Reactor with setMessageReaction. Telegram
// takes only the emoji on its list of reactions; another is refused.
func (a *Adapter) React(ctx context.Context, chatID, messageID, emoji string) error {
	return a.setReaction(ctx, chatID, messageID, []map[string]string{{"type": "emoji", "emoji": emoji}})
}

// Unreact takes the bot's reaction away: setMessageReaction with none.
func (a *Adapter) Unreact(ctx context.Context, chatID, messageID, _ string) error {
	return a.setReaction(ctx, chatID, messageID, []map[string]string{})
}

func (a *Adapter) setReaction(ctx context.Context, chatID, messageID string, reaction []map[string]string) error {
	chat, _, err := parseChatID(chatID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(reaction)
	if err != nil {
		return err
	}
	_, err = a.api.call(ctx, "setMessageReaction", tgbotapi.Params{"chat_id": chat, "message_id": messageID, "reaction": string(b)})
	return err
}
