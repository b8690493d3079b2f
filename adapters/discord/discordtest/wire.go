package discordtest

import "time"

// The types below are the parts of Discord's JSON objects the fake sends
// and reads, with Discord's own field names, so the client library parses
// the bytes it would get from Discord.

// User is a Discord user object.
type User struct {
	ID            string `json:"id"`
	Username      string `json:"username"`
	GlobalName    string `json:"global_name,omitempty"`
	Discriminator string `json:"discriminator"`
	Bot           bool   `json:"bot,omitempty"`
}

// Member is a guild member object as MESSAGE_CREATE carries it (without
// its user, which is the message's author).
type Member struct {
	Nick     string    `json:"nick,omitempty"`
	Roles    []string  `json:"roles"`
	JoinedAt time.Time `json:"joined_at"`
}

// Attachment is a message attachment object.
type Attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        int    `json:"size"`
	URL         string `json:"url"`
	ProxyURL    string `json:"proxy_url"`
}

// MessageReference points at the message a reply answers.
type MessageReference struct {
	Type            int    `json:"type,omitempty"` // 0 a reply, 1 a forward
	MessageID       string `json:"message_id,omitempty"`
	ChannelID       string `json:"channel_id,omitempty"`
	GuildID         string `json:"guild_id,omitempty"`
	FailIfNotExists *bool  `json:"fail_if_not_exists,omitempty"`
}

// Message types used by the fake.
const (
	TypeDefault = 0
	TypeReply   = 19
)

// Message is a message object, as MESSAGE_CREATE and the REST API carry it.
type Message struct {
	ID                string            `json:"id"`
	ChannelID         string            `json:"channel_id"`
	GuildID           string            `json:"guild_id,omitempty"`
	Author            User              `json:"author"`
	Member            *Member           `json:"member,omitempty"`
	Content           string            `json:"content"`
	Timestamp         time.Time         `json:"timestamp"`
	EditedTimestamp   *time.Time        `json:"edited_timestamp"`
	Type              int               `json:"type"`
	Mentions          []User            `json:"mentions"`
	MentionRoles      []string          `json:"mention_roles"`
	Attachments       []Attachment      `json:"attachments"`
	Embeds            []any             `json:"embeds"`
	Nonce             string            `json:"nonce,omitempty"`
	WebhookID         string            `json:"webhook_id,omitempty"`
	MessageReference  *MessageReference `json:"message_reference,omitempty"`
	ReferencedMessage *Message          `json:"referenced_message,omitempty"`
	Components        []Component       `json:"components,omitempty"`
}

// AllowedMentions is the allowed_mentions object of a sent message.
type AllowedMentions struct {
	Parse       []string `json:"parse"`
	Users       []string `json:"users,omitempty"`
	Roles       []string `json:"roles,omitempty"`
	RepliedUser bool     `json:"replied_user,omitempty"`
}

// SentMessage is one POST /channels/{id}/messages the fake accepted.
type SentMessage struct {
	ID               string // the id the fake gave the new message
	ChannelID        string
	Content          string
	Nonce            string
	EnforceNonce     bool
	MessageReference *MessageReference
	AllowedMentions  *AllowedMentions
	// Files are the attachments uploaded with it (multipart/form-data).
	Files []SentFile
}

// SentFile is one attachment a message was created with, with its bytes.
type SentFile struct {
	Name, ContentType string
	Data              []byte
}

// Edit is one PATCH /channels/{id}/messages/{id} the fake accepted.
type Edit struct {
	ChannelID, MessageID, Content string
}

// Identify is the d of an op 2 IDENTIFY the client sent.
type Identify struct {
	Token      string         `json:"token"`
	Intents    int            `json:"intents"`
	Shard      *[2]int        `json:"shard,omitempty"`
	Compress   bool           `json:"compress"`
	Properties map[string]any `json:"properties"`
}

// Resume is the d of an op 6 RESUME the client sent.
type Resume struct {
	Token     string `json:"token"`
	SessionID string `json:"session_id"`
	Seq       int64  `json:"seq"`
}

// Request is one REST request the fake saw.
type Request struct {
	Method, Path string
	// Authorized says the Authorization header carried the bot token (for
	// the CDN: that it carried anything); the header itself is not kept.
	Authorized bool
}
