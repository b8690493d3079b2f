package discordtest

import (
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// Reaction is one reaction the bot added or removed, in order.
type Reaction struct {
	ChannelID, MessageID, Emoji string
	Removed                     bool
}

// knownEmoji says whether Discord would take emoji as a reaction: a
// unicode emoji, or a custom one as name:id.
func knownEmoji(emoji string) bool {
	if name, id, ok := strings.Cut(emoji, ":"); ok {
		return name != "" && isSnowflake(id)
	}
	r, _ := utf8.DecodeRuneInString(emoji)
	return emoji != "" && r >= 0x2000
}

// react serves PUT and DELETE .../messages/{message}/reactions/{emoji}/@me.
func (s *Server) react(w http.ResponseWriter, r *http.Request) {
	channel, message, emoji := r.PathValue("channel"), r.PathValue("message"), r.PathValue("emoji")
	switch {
	case !isSnowflake(channel):
		writeError(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	case !isSnowflake(message):
		writeError(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	case !knownEmoji(emoji):
		writeError(w, http.StatusBadRequest, 10014, "Unknown Emoji")
		return
	}
	removed := r.Method == http.MethodDelete
	s.mu.Lock()
	if s.reactions == nil {
		s.reactions = map[string][]string{}
	}
	key := channel + "/" + message
	have := slices.DeleteFunc(s.reactions[key], func(e string) bool { return e == emoji })
	if !removed {
		have = append(have, emoji)
	}
	s.reactions[key] = have
	s.reactionLog = append(s.reactionLog, Reaction{ChannelID: channel, MessageID: message, Emoji: emoji, Removed: removed})
	s.notifyLocked()
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// Reactions are the bot's reactions on a message now.
func (s *Server) Reactions(channelID, messageID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reactions[channelID+"/"+messageID])
}

// ReactionLog is every reaction added or removed, in order.
func (s *Server) ReactionLog() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reactionLog)
}
