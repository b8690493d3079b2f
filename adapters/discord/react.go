package discord

import (
	"context"

	"github.com/bwmarrin/discordgo"

	"github.com/parleyd/parley/adapters"
)

var _ adapters.Reactor = (*Adapter)(nil)

// React implements adapters.Reactor: the bot's reaction on a message, a
// unicode emoji or a custom one as name:id.
func (a *Adapter) React(ctx context.Context, chatID, messageID, emoji string) error {
	if err := a.checkReaction(chatID, messageID); err != nil {
		return err
	}
	if err := a.s.MessageReactionAdd(chatID, messageID, emoji, discordgo.WithContext(ctx)); err != nil {
		return a.apiError("react", err)
	}
	return nil
}

// Unreact takes the bot's reaction away.
func (a *Adapter) Unreact(ctx context.Context, chatID, messageID, emoji string) error {
	if err := a.checkReaction(chatID, messageID); err != nil {
		return err
	}
	if err := a.s.MessageReactionRemove(chatID, messageID, emoji, "@me", discordgo.WithContext(ctx)); err != nil {
		return a.apiError("remove a reaction", err)
	}
	return nil
}

func (a *Adapter) checkReaction(chatID, messageID string) error {
	if err := checkID("chat id", chatID); err != nil {
		return err
	}
	return checkID("message id", messageID)
}
