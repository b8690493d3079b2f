package whatsapp

import (
	"context"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/parleyd/parley/adapters"
)

var _ adapters.Reactor = (*Adapter)(nil)

// React implements adapters.Reactor: a reaction message on a message
// received. In a group it names the message's sender, as WhatsApp
// requires, from the recent messages the adapter remembers.
func (a *Adapter) React(ctx context.Context, chatID, messageID, emoji string) error {
	return a.sendReaction(ctx, chatID, messageID, emoji)
}

// Unreact takes the reaction away: a reaction message with no emoji.
func (a *Adapter) Unreact(ctx context.Context, chatID, messageID, _ string) error {
	return a.sendReaction(ctx, chatID, messageID, "")
}

func (a *Adapter) sendReaction(ctx context.Context, chatID, messageID, emoji string) error {
	chat, err := parseChatID(chatID)
	if err != nil {
		return err
	}
	c := a.client()
	if c == nil {
		return ErrNotConnected
	}
	key := &waCommon.MessageKey{RemoteJID: proto.String(chat.String()), FromMe: proto.Bool(false), ID: proto.String(messageID)}
	if chat.Server == types.GroupServer {
		q, ok := a.quotes.get(chatID, messageID)
		if !ok {
			return fmt.Errorf("whatsapp reaction: the sender of message %s in %s is no longer known", messageID, chatID)
		}
		key.Participant = proto.String(q.sender.String())
	}
	msg := &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Key: key, Text: proto.String(emoji),
		SenderTimestampMS: proto.Int64(time.Now().UnixMilli())}}
	if _, err := c.SendMessage(ctx, chat, msg); err != nil {
		return fmt.Errorf("whatsapp reaction: %w", sendError(err))
	}
	return nil
}
