package telegramtest

import (
	"encoding/json"
	"strings"
	"unicode/utf16"
)

// These are the Bot API's own objects, as JSON, for building the updates
// a test injects. Only the fields parley reads are here.

// Update is one update, as getUpdates returns it and webhooks post it.
type Update struct {
	UpdateID      int             `json:"update_id"`
	Message       *Message        `json:"message,omitempty"`
	EditedMessage *Message        `json:"edited_message,omitempty"`
	ChannelPost   *Message        `json:"channel_post,omitempty"`
	CallbackQuery json.RawMessage `json:"callback_query,omitempty"`
}

// Message is a message.
type Message struct {
	MessageID       int         `json:"message_id"`
	MessageThreadID int         `json:"message_thread_id,omitempty"`
	IsTopicMessage  bool        `json:"is_topic_message,omitempty"`
	From            *User       `json:"from,omitempty"`
	SenderChat      *Chat       `json:"sender_chat,omitempty"`
	Date            int64       `json:"date"`
	EditDate        int64       `json:"edit_date,omitempty"`
	Chat            Chat        `json:"chat"`
	ReplyToMessage  *Message    `json:"reply_to_message,omitempty"`
	Text            string      `json:"text,omitempty"`
	Entities        []Entity    `json:"entities,omitempty"`
	Caption         string      `json:"caption,omitempty"`
	CaptionEntities []Entity    `json:"caption_entities,omitempty"`
	Photo           []PhotoSize `json:"photo,omitempty"`
	Document        *Document   `json:"document,omitempty"`
	Voice           *Voice      `json:"voice,omitempty"`
	Audio           *Audio      `json:"audio,omitempty"`
	VideoNote       *VideoNote  `json:"video_note,omitempty"`
	Sticker         *Sticker    `json:"sticker,omitempty"`
	Location        *Location   `json:"location,omitempty"`
	Venue           *Venue      `json:"venue,omitempty"`
	Contact         *Contact    `json:"contact,omitempty"`
	NewChatMembers  []User      `json:"new_chat_members,omitempty"`
	// ForumTopicCreated marks a topic's first message, e.g.
	// json.RawMessage(`{"name":"Ideas","icon_color":7322096}`).
	ForumTopicCreated json.RawMessage `json:"forum_topic_created,omitempty"`
}

// Chat is a chat: Type is "private", "group", "supergroup" or "channel".
type Chat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
	IsForum   bool   `json:"is_forum,omitempty"`
}

// User is a user or bot.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name,omitempty"`
	Username  string `json:"username,omitempty"`
}

// Entity is a message entity; Offset and Length count UTF-16 code units.
type Entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
	URL    string `json:"url,omitempty"`
	User   *User  `json:"user,omitempty"`
}

// PhotoSize is one size of a photo.
type PhotoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	FileSize     int    `json:"file_size,omitempty"`
}

// Document is a file sent as a document.
type Document struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int    `json:"file_size,omitempty"`
}

// Voice is a voice note (Ogg Opus).
type Voice struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Duration     int    `json:"duration"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int    `json:"file_size,omitempty"`
}

// VideoNote is a round video message (MPEG-4).
type VideoNote struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Length       int    `json:"length"`
	Duration     int    `json:"duration"`
	FileSize     int    `json:"file_size,omitempty"`
}

// Sticker is a sticker, with the emoji it stands for.
type Sticker struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Type         string `json:"type"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	IsAnimated   bool   `json:"is_animated"`
	IsVideo      bool   `json:"is_video"`
	Emoji        string `json:"emoji,omitempty"`
}

// Location is a point on the map; LivePeriod is set for a live one.
type Location struct {
	Latitude   float64 `json:"latitude"`
	Longitude  float64 `json:"longitude"`
	LivePeriod int     `json:"live_period,omitempty"`
}

// Venue is a named place.
type Venue struct {
	Location Location `json:"location"`
	Title    string   `json:"title"`
	Address  string   `json:"address"`
}

// Contact is a phone contact.
type Contact struct {
	PhoneNumber string `json:"phone_number"`
	FirstName   string `json:"first_name"`
	LastName    string `json:"last_name,omitempty"`
	UserID      int64  `json:"user_id,omitempty"`
}

// Audio is an audio file sent as music.
type Audio struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Duration     int    `json:"duration"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int    `json:"file_size,omitempty"`
}

// EntityFor returns an entity of typ ("mention", "bot_command", ...)
// over the first occurrence of part in text, with offsets in UTF-16 as
// Telegram counts them. It panics if part is not in text.
func EntityFor(typ, text, part string) Entity {
	i := strings.Index(text, part)
	if i < 0 {
		panic("telegramtest: " + part + " is not in " + text)
	}
	return Entity{Type: typ, Offset: len(utf16.Encode([]rune(text[:i]))), Length: len(utf16.Encode([]rune(part)))}
}

// PrivateChat is the private chat with a user.
func PrivateChat(u User) Chat {
	return Chat{ID: u.ID, Type: "private", FirstName: u.FirstName, LastName: u.LastName, Username: u.Username}
}

// Group is a basic group.
func Group(id int64, title string) Chat { return Chat{ID: id, Type: "group", Title: title} }

// Supergroup is a supergroup; forum says whether it has topics.
func Supergroup(id int64, title string, forum bool) Chat {
	return Chat{ID: id, Type: "supergroup", Title: title, IsForum: forum}
}
