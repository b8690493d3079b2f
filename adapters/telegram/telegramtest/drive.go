package telegramtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// DriveChats sends total messages from chats private chats (ids 1000 on)
// through the fake Bot API, each chat keeping up to window messages
// unanswered, as people typing ahead of the bot do: within the gateway's
// per-conversation queue, so every message is answered by the agent. It
// returns once all are answered, or with an error naming the first reply
// that is not an answer to its chat's own message.
func DriveChats(ctx context.Context, tg *Server, total, chats, window int) error {
	return DriveChatsWith(ctx, tg, total, chats, window, func(chat int64, text string) { tg.InjectText(chat, chat, text) })
}

// DriveChatsWith is DriveChats with the n-th message's text sent by send
// (as a voice note saying it, say); each reply must still hold the text.
func DriveChatsWith(ctx context.Context, tg *Server, total, chats, window int, send func(chat int64, text string)) error {
	injected := make([]int, chats)
	answered := make([]int, chats)
	sentSeen, sent := 0, 0
	next := 0
	for sent < total {
		for c := range chats {
			for injected[c]-answered[c] < window && next < total {
				chat := int64(1000 + c)
				send(chat, fmt.Sprintf("message %d from chat %d", next, chat))
				injected[c]++
				next++
			}
		}
		if err := tg.WaitFor(ctx, func() bool { return tg.SentCount() > sentSeen }); err != nil {
			return fmt.Errorf("%d of %d answered: %w", sent, total, err)
		}
		for _, m := range tg.SentSince(sentSeen) {
			sentSeen++
			c, err := strconv.Atoi(m.ChatID)
			if err != nil || c < 1000 || c >= 1000+chats {
				return fmt.Errorf("a reply to chat %q, which sent nothing", m.ChatID)
			}
			if !strings.Contains(m.Text, "from chat "+m.ChatID) {
				return fmt.Errorf("chat %s got %q, not an answer to its message", m.ChatID, m.Text)
			}
			answered[c-1000]++
			sent++
		}
	}
	return nil
}
