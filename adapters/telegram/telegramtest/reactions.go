package telegramtest

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
)

// Reaction is one setMessageReaction the fake accepted: the bot's
// reactions on a message after it (none: taken away).
type Reaction struct {
	ChatID    string
	MessageID int
	Emoji     []string
}

// reactionEmoji are the emoji a bot may react with, as Telegram allows
// (a part of its list); others are refused with REACTION_INVALID.
var reactionEmoji = []string{"👍", "👎", "❤", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🎉", "🤩", "🙏", "👌",
	"💯", "⚡", "🏆", "👀", "🤝", "✍", "🫡", "👨‍💻", "🆒", "😎", "🤓", "🙈"}

func (s *Server) setMessageReaction(p url.Values) *apiError {
	chat := p.Get("chat_id")
	if chat == "" {
		return badRequest("chat_id is empty")
	}
	id, err := strconv.Atoi(p.Get("message_id"))
	if err != nil || id <= 0 {
		return badRequest("message_id is empty")
	}
	var types []struct {
		Type  string `json:"type"`
		Emoji string `json:"emoji"`
	}
	if r := p.Get("reaction"); r != "" {
		if err := json.Unmarshal([]byte(r), &types); err != nil {
			return badRequest("can't parse reaction types JSON object")
		}
	}
	var emoji []string
	for _, t := range types {
		if t.Type != "emoji" || !slices.Contains(reactionEmoji, t.Emoji) {
			return badRequest("REACTION_INVALID")
		}
		emoji = append(emoji, t.Emoji)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reactions == nil {
		s.reactions = map[string]map[int][]string{}
	}
	if s.reactions[chat] == nil {
		s.reactions[chat] = map[int][]string{}
	}
	s.reactions[chat][id] = emoji
	s.reactionLog = append(s.reactionLog, Reaction{ChatID: chat, MessageID: id, Emoji: emoji})
	s.broadcast()
	return nil
}

// Reactions are the bot's reactions on a message now.
func (s *Server) Reactions(chatID string, messageID int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reactions[chatID][messageID])
}

// ReactionLog is every setMessageReaction accepted, in order.
func (s *Server) ReactionLog() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reactionLog)
}
