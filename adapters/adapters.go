// Package adapters defines how channels meet the gateway: the Adapter
// interface every channel implements, the optional capabilities some have,
// the Inbound and Outbound envelopes, and the registry adapters join from init.
package adapters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// ID names one configured adapter instance, e.g. "tg-main".
type ID string

// MaxFiles is the most file references one inbound message may carry.
const MaxFiles = 10

// MaxTextBytes is the largest inbound text accepted (1 MiB).
const MaxTextBytes = 1 << 20

// Inbound is one message from a platform, in the gateway's terms.
type Inbound struct {
	Adapter     ID        `json:"adapter"`
	Surface     string    `json:"surface"` // "telegram", "discord", "cli", ...
	ChatID      string    `json:"chat_id"` // the conversation on the platform
	UserID      string    `json:"user_id"` // the sender
	DisplayName string    `json:"display_name,omitempty"`
	Group       bool      `json:"group,omitempty"`     // a chat with several people
	Mentioned   bool      `json:"mentioned,omitempty"` // the bot was addressed in a group
	MessageID   string    `json:"message_id"`          // the platform's id, for dedupe
	Text        string    `json:"text"`
	Files       []FileRef `json:"files,omitempty"`
	ReplyTo     string    `json:"reply_to,omitempty"` // platform id of the message replied to
	// Edits, on an edit of a message sent earlier, is that message's
	// platform id; MessageID then names the edit itself (each edit is
	// its own message for dedupe) and Text is the new text.
	Edits string    `json:"edits,omitempty"`
	Time  time.Time `json:"time"`
	// AgentID, set by parley's own producers (cron, webhooks, the API),
	// names the agent to answer, ahead of the bindings. Channels leave it
	// empty.
	AgentID string `json:"agent_id,omitempty"`
	// Model, set by the API for one message, overrides the model for the
	// run that answers it.
	Model string `json:"model,omitempty"`
	// ReasoningEffort, set by the API for one message, overrides the
	// agent's for the run that answers it.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Workspace, set by the API for a session in one, is the workspace of
	// the message's session; channels leave it to the bindings and their
	// adapter's config (gateway.Options.Workspace).
	Workspace string `json:"workspace,omitempty"`
	// Unattributed, set by the API, keeps the text as the client sent it,
	// without a sender's name, even in a session keyed like a group's
	// (one created without a user): it is no group member's message.
	Unattributed bool `json:"unattributed,omitempty"`
	// Transcribed says Text holds a machine transcript of the message's
	// voice notes (after any caption), made before the message was stored.
	Transcribed bool `json:"transcribed,omitempty"`
	// VoiceFailed, set when a voice note couldn't be transcribed, is the
	// reference the log gives the reason under.
	VoiceFailed string `json:"voice_failed,omitempty"`
}

// FileRef points at a file on the platform; it is fetched only when needed.
type FileRef struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Size      int64  `json:"size,omitempty"`
	URL       string `json:"url,omitempty"`
	// Seconds is how long a voice note or audio lasts, where the
	// platform says.
	Seconds int `json:"seconds,omitempty"`
	// Spoken marks a video whose sound is someone talking (a Telegram
	// video note, a WhatsApp video note): transcribed as a voice note is
	// (IsSpeech).
	Spoken bool `json:"spoken,omitempty"`
	// Data is the file's bytes when they were fetched already (a voice
	// note, to transcribe it), so its turn doesn't fetch it again. It is
	// never stored: a message run again after a restart fetches its files.
	Data []byte `json:"-"`
}

// Attributed is the text as the model should see it: in a group chat,
// where several people talk, prefixed with who said it; from the API or
// the CLI, as sent.
func (in Inbound) Attributed() string {
	if !in.Group || in.Unattributed {
		return in.Text
	}
	name := in.DisplayName
	if name == "" {
		name = in.UserID
	}
	return name + ": " + in.Text
}

// Validate says what is wrong with an inbound message, so an adapter can
// refuse it before the platform is told it arrived.
func (in Inbound) Validate() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"adapter", string(in.Adapter)}, {"surface", in.Surface}, {"chat_id", in.ChatID},
		{"user_id", in.UserID}, {"message_id", in.MessageID},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s missing", ErrInvalidInbound, strings.Join(missing, ", "))
	}
	if len(in.Files) > MaxFiles {
		return fmt.Errorf("%w: %d files; at most %d per message", ErrInvalidInbound, len(in.Files), MaxFiles)
	}
	if len(in.Text) > MaxTextBytes {
		return fmt.Errorf("%w: text is %d bytes; at most %d", ErrInvalidInbound, len(in.Text), MaxTextBytes)
	}
	if !utf8.ValidString(in.Text) {
		return fmt.Errorf("%w: text is not valid UTF-8", ErrInvalidInbound)
	}
	return nil
}

// Outbound is one message to send.
type Outbound struct {
	Adapter ID     `json:"adapter"`
	ChatID  string `json:"chat_id"`
	Text    string `json:"text"`
	ReplyTo string `json:"reply_to,omitempty"`
	// IdempotencyKey is stable across retries of the same message, for
	// platforms that can use it to drop a repeat.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// File, when set, makes the message this file, with Text its caption
	// (possibly empty). Only a FileSender is given one.
	File *File `json:"-"`
}

// File is a file going out to a chat, read from the session file store
// just before it is sent.
type File struct {
	Name      string
	MediaType string
	Data      []byte
	// Voice sends it as a voice note (Ogg Opus audio: Telegram's
	// sendVoice, WhatsApp's push-to-talk audio) where the platform has
	// them.
	Voice bool
}

// OutFile names a file a reply carries: a file of the turn's session file
// store, by name, with an optional caption. The outbox keeps the name,
// never the bytes; the sender reads them when it sends.
type OutFile struct {
	// Session is the session whose file store holds it; "" is the
	// session of the turn that sends it.
	Session   string `json:"session,omitempty"`
	Name      string `json:"name"`
	MediaType string `json:"media_type,omitempty"`
	Size      int64  `json:"size,omitempty"`
	Caption   string `json:"caption,omitempty"`
}

// FileSender is implemented by channels that can send files: SendFile
// sends out.File (an image as a photo where the platform shows one),
// with out.Text as its caption; MaxFileBytes is the largest file the
// platform takes from a bot, checked before a file is read or sent.
type FileSender interface {
	SendFile(ctx context.Context, out Outbound) (Sent, error)
	MaxFileBytes() int64
}

// Sent is what the platform said about a sent message.
type Sent struct {
	MessageID string // the platform's id of the new message
}

// Sink takes inbound messages. It returns nil only once the message is
// stored durably; that is the adapter's licence to acknowledge it.
type Sink interface {
	Deliver(ctx context.Context, in Inbound) error
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(ctx context.Context, in Inbound) error

// Deliver calls f.
func (f SinkFunc) Deliver(ctx context.Context, in Inbound) error { return f(ctx, in) }

// Adapter is a channel. Start runs until ctx ends, delivering what arrives to
// sink; Send sends one message of at most the adapter's length limit.
type Adapter interface {
	Start(ctx context.Context, sink Sink) error
	Send(ctx context.Context, out Outbound) (Sent, error)
}

// Limiter is implemented by adapters whose platform caps message length;
// longer replies are split before Send. Without it there is no limit.
type Limiter interface {
	// MaxMessageLength is the limit in characters (runes).
	MaxMessageLength() int
}

// Editor is implemented by adapters that can edit a sent message, used to
// show a long reply as it streams.
type Editor interface {
	Edit(ctx context.Context, chatID, messageID, text string) error
}

// A Checker can tell whether its credentials work without starting:
// Check asks the platform who the bot is and returns a line that says
// (e.g. "@family_bot"), or an error that says what is wrong and what to
// do. parley doctor and parley init call it.
type Checker interface {
	Check(ctx context.Context) (string, error)
}

// StreamingMark ends the text of a reply still being written, as a
// streamed reply shows it; the final text comes without it.
const StreamingMark = " …"

// A StreamPacer is a channel that can show a streamed reply more often
// than once a second (a terminal): StreamEvery is the least time between
// two updates.
type StreamPacer interface {
	StreamEvery() time.Duration
}

// Fetcher is implemented by adapters that can download a file a message
// referred to (a photo for a vision model, say). A file over maxBytes is
// an error wrapping ErrTooLarge, found out before it is all read.
type Fetcher interface {
	Fetch(ctx context.Context, f FileRef, maxBytes int64) (data []byte, mediaType string, err error)
}

// Fetched is what Fetch returns for data it read of the file what names
// ("telegram file ID"), at most maxBytes+1 bytes when maxBytes is set: an
// error wrapping ErrTooLarge when it is over, else data and its media
// type, the one given or else the one data's first bytes show.
func Fetched(what string, data []byte, mediaType string, maxBytes int64) ([]byte, string, error) {
	if maxBytes > 0 && int64(len(data)) > maxBytes {
		return nil, "", fmt.Errorf("%s is over %d bytes: %w", what, maxBytes, ErrTooLarge)
	}
	if mediaType == "" {
		mediaType, _, _ = strings.Cut(http.DetectContentType(data), ";")
	}
	return data, mediaType, nil
}

// A Namer knows the names the bot goes by on its platform ("family_bot"),
// so that a voice note that starts by saying one addresses it in a group.
type Namer interface {
	BotNames() []string
}

// Typer is implemented by adapters that can show a typing indicator.
type Typer interface {
	Typing(ctx context.Context, chatID string) error
}

// A StatusLiner shows a chat what its turn is doing while the reply
// waits (the model being tried again, the conversation compacted), as a
// line apart from the reply: a terminal does. It must not block.
type StatusLiner interface {
	StatusLine(ctx context.Context, chatID, line string)
}

// A Reactor can put the bot's reaction (an emoji) on a message a person
// sent, and take it away: how a channel with ack_reaction shows that a
// message was taken while its turn waits and runs.
type Reactor interface {
	React(ctx context.Context, chatID, messageID, emoji string) error
	Unreact(ctx context.Context, chatID, messageID, emoji string) error
}

// ErrUndeliverable is what a Send error wraps when trying again can't
// help: the person blocked the bot, or the chat is gone. The outbox marks
// such a reply failed at once (an operator may retry it from the
// dashboard) instead of retrying it for hours.
var ErrUndeliverable = errors.New("the platform won't deliver to this chat")

// RateLimitError is returned by Send when the platform asks to slow down.
type RateLimitError struct {
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limited by the platform; retry after %s", e.RetryAfter)
}
