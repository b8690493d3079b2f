package telegram

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/adapters"
)

// Surface is the Inbound surface of every Telegram message; session keys
// read "telegram:<chat id>".
const Surface = "telegram"

// topicSep joins a forum supergroup's chat id and topic (message thread)
// id into one ChatID, e.g. "-1001234567890:topic:42": each topic is its own
// conversation, and Send posts back into it.
const topicSep = ":topic:"

// update is an update as the Bot API sends it. The library's types predate
// forum topics, so its Message is extended with the two fields they need.
type update struct {
	UpdateID      int            `json:"update_id"`
	Message       *message       `json:"message,omitempty"`
	EditedMessage *message       `json:"edited_message,omitempty"`
	CallbackQuery *callbackQuery `json:"callback_query,omitempty"`
}

type message struct {
	tgbotapi.Message
	MessageThreadID int  `json:"message_thread_id,omitempty"`
	IsTopicMessage  bool `json:"is_topic_message,omitempty"`
}

// allowedUpdates are the update kinds asked for: new messages, their
// edits, and presses on the buttons of the bot's own questions. Channel
// posts and the rest are not asked for, and ignored if they come.
const allowedUpdates = `["message","edited_message","callback_query"]`

// identity is who the bot is, for telling when it is addressed.
type identity struct {
	id       int64
	username string // without "@"
}

// chatKey is the ChatID of a message: the chat id, plus the topic in a
// forum.
func chatKey(chatID int64, m *message) string {
	id := strconv.FormatInt(chatID, 10)
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		return id + topicSep + strconv.Itoa(m.MessageThreadID)
	}
	return id
}

// parseChatID splits a ChatID into the Bot API's chat_id and
// message_thread_id (0 outside forum topics).
func parseChatID(s string) (chat string, thread int, err error) {
	chat, topic, ok := strings.Cut(s, topicSep)
	if chat == "" {
		return "", 0, fmt.Errorf("telegram: empty chat id")
	}
	if ok {
		thread, err = strconv.Atoi(topic)
		if err != nil || thread <= 0 {
			return "", 0, fmt.Errorf("telegram: chat id %q: the topic after %q is not a positive number", s, topicSep)
		}
	}
	return chat, thread, nil
}

// toInbound converts an update. ok is false for updates that are not new
// messages or edits, for a live location's moves, and for messages with
// nothing the gateway can take (service messages such as members joining,
// polls). A place, a contact or a sticker becomes a line of text (shared);
// a video note, a file transcribed as a voice note is.
func toInbound(adapter adapters.ID, me identity, u *update) (adapters.Inbound, bool) {
	m := u.Message
	if m == nil && u.EditedMessage != nil {
		if u.EditedMessage.Location != nil {
			// A live location moving: not an edit anyone typed.
			return adapters.Inbound{}, false
		}
		in, ok := messageInbound(adapter, me, u.EditedMessage)
		if ok {
			// Each edit is its own message, naming the one it edits.
			in.Edits = in.MessageID
			in.MessageID += ":edit:" + strconv.Itoa(u.EditedMessage.EditDate)
		}
		return in, ok
	}
	return messageInbound(adapter, me, m)
}

// messageInbound converts a message, new or edited.
func messageInbound(adapter adapters.ID, me identity, m *message) (adapters.Inbound, bool) {
	if m == nil || m.Chat == nil {
		return adapters.Inbound{}, false
	}
	text, entities := m.Text, m.Entities
	if text == "" {
		text, entities = m.Caption, m.CaptionEntities
	}
	if text == "" {
		text = shared(&m.Message)
	}
	files := fileRefs(&m.Message)
	if text == "" && len(files) == 0 {
		return adapters.Inbound{}, false
	}
	in := adapters.Inbound{
		Adapter:   adapter,
		Surface:   Surface,
		ChatID:    chatKey(m.Chat.ID, m),
		MessageID: strconv.Itoa(m.MessageID),
		Text:      text,
		Files:     files,
		Time:      time.Unix(int64(m.Date), 0),
		Group:     m.Chat.Type == "group" || m.Chat.Type == "supergroup",
	}
	switch {
	case m.SenderChat != nil: // an anonymous admin, or a linked channel
		in.UserID = strconv.FormatInt(m.SenderChat.ID, 10)
		in.DisplayName = m.SenderChat.Title
	case m.From != nil:
		in.UserID = strconv.FormatInt(m.From.ID, 10)
		in.DisplayName = displayName(m.From)
	}
	if r := m.ReplyToMessage; r != nil && !isTopicRoot(m) {
		in.ReplyTo = strconv.Itoa(r.MessageID)
	}
	if in.Group {
		in.Mentioned = mentions(me, text, entities) || (in.ReplyTo != "" && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == me.id)
	}
	return in, true
}

// isTopicRoot reports whether m's reply_to_message is only its forum
// topic's first message, which Telegram sets on every message in a topic
// that isn't a reply to anything else.
func isTopicRoot(m *message) bool {
	return m.IsTopicMessage && m.ReplyToMessage != nil && m.ReplyToMessage.MessageID == m.MessageThreadID
}

func displayName(u *tgbotapi.User) string {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	if name == "" && u.UserName != "" {
		name = "@" + u.UserName
	}
	return name
}

// mentions reports whether a group message addresses the bot: @username,
// a text mention of the bot's account, or a command that is either
// /cmd@username or bare (Telegram passes a bare /cmd to the bot it is
// meant for).
func mentions(me identity, text string, entities []tgbotapi.MessageEntity) bool {
	var units []uint16 // entity offsets count UTF-16 code units
	for _, e := range entities {
		switch e.Type {
		case "text_mention":
			if e.User != nil && e.User.ID == me.id {
				return true
			}
		case "mention", "bot_command":
			if units == nil {
				units = utf16.Encode([]rune(text))
			}
			if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(units) {
				continue
			}
			s := string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
			if e.Type == "mention" {
				if me.username != "" && strings.EqualFold(s, "@"+me.username) {
					return true
				}
				continue
			}
			_, to, addressed := strings.Cut(s, "@")
			if e.Offset == 0 && (!addressed || (me.username != "" && strings.EqualFold(to, me.username))) {
				return true
			}
		}
	}
	return false
}

// fileRefs lists a message's photo (its largest size) and attachments as
// references; nothing is downloaded.
func fileRefs(m *tgbotapi.Message) []adapters.FileRef {
	var out []adapters.FileRef
	if len(m.Photo) > 0 {
		best := m.Photo[0]
		for _, p := range m.Photo[1:] {
			if p.Width*p.Height > best.Width*best.Height || (p.Width*p.Height == best.Width*best.Height && p.FileSize > best.FileSize) {
				best = p
			}
		}
		out = append(out, adapters.FileRef{ID: best.FileID, Name: "photo.jpg", MediaType: "image/jpeg", Size: int64(best.FileSize)})
	}
	if d := m.Document; d != nil {
		out = append(out, adapters.FileRef{ID: d.FileID, Name: d.FileName, MediaType: d.MimeType, Size: int64(d.FileSize)})
	}
	if a := m.Audio; a != nil {
		out = append(out, adapters.FileRef{ID: a.FileID, Name: orDefault(a.FileName, "audio"), MediaType: orDefault(a.MimeType, "audio/mpeg"), Size: int64(a.FileSize), Seconds: a.Duration})
	}
	if v := m.Voice; v != nil {
		out = append(out, adapters.FileRef{ID: v.FileID, Name: "voice.ogg", MediaType: orDefault(v.MimeType, "audio/ogg"), Size: int64(v.FileSize), Seconds: v.Duration})
	}
	if v := m.Video; v != nil {
		out = append(out, adapters.FileRef{ID: v.FileID, Name: v.FileName, MediaType: orDefault(v.MimeType, "video/mp4"), Size: int64(v.FileSize)})
	}
	if v := m.VideoNote; v != nil {
		// A round video message: someone talking to the camera, heard as
		// a voice note is.
		out = append(out, adapters.FileRef{ID: v.FileID, Name: "video_note.mp4", MediaType: "video/mp4", Size: int64(v.FileSize),
			Seconds: v.Duration, Spoken: true})
	}
	return out
}

// shared is the text of a message that shares something other than text
// or a file (a place, a contact, a sticker), as a line the model reads;
// "" for any other.
func shared(m *tgbotapi.Message) string {
	switch {
	case m.Venue != nil:
		v := m.Venue
		return adapters.SharedPlace(v.Title, v.Address, v.Location.Latitude, v.Location.Longitude)
	case m.Location != nil:
		return adapters.SharedLocation(m.Location.Latitude, m.Location.Longitude, m.Location.LivePeriod > 0)
	case m.Contact != nil:
		c := m.Contact
		return adapters.SharedContact(c.FirstName+" "+c.LastName, c.PhoneNumber)
	case m.Sticker != nil:
		return adapters.SentSticker(m.Sticker.Emoji)
	}
	return ""
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
