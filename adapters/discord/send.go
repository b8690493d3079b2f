package discord

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/textcut"
)

// createMessage is the body of POST /channels/{id}/messages. discordgo's
// MessageSend has no nonce fields, so the body is ours.
type createMessage struct {
	Content string `json:"content"`
	// Nonce with EnforceNonce makes Discord return the message already
	// made with that nonce (within a few minutes) instead of a second one:
	// a retry after a lost response does not post twice.
	Nonce            string                            `json:"nonce,omitempty"`
	EnforceNonce     bool                              `json:"enforce_nonce,omitempty"`
	MessageReference *discordgo.MessageReference       `json:"message_reference,omitempty"`
	AllowedMentions  *discordgo.MessageAllowedMentions `json:"allowed_mentions"`
}

// allowedMentions lets a reply ping the users it names and the person it
// answers, never @everyone, @here or a role: a model's text can't page a
// whole server.
var allowedMentions = &discordgo.MessageAllowedMentions{
	Parse:       []discordgo.AllowedMentionType{discordgo.AllowedMentionTypeUsers},
	RepliedUser: true,
}

// maxNonce is Discord's limit on a nonce's length.
const maxNonce = 25

// nonce turns an idempotency key into a Discord nonce.
func nonce(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:maxNonce]
}

// Send posts one message of at most MaxMessageLength characters to the
// chat (a channel or thread id), as a reply when ReplyTo is set. A 429
// comes back as *adapters.RateLimitError.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	if err := checkID("chat id", out.ChatID); err != nil {
		return adapters.Sent{}, err
	}
	if err := checkText(out.Text); err != nil {
		return adapters.Sent{}, err
	}
	body := createMessage{Content: out.Text, AllowedMentions: allowedMentions}
	if n := nonce(out.IdempotencyKey); n != "" {
		body.Nonce, body.EnforceNonce = n, true
	}
	if out.ReplyTo != "" {
		if err := checkID("reply_to message id", out.ReplyTo); err != nil {
			return adapters.Sent{}, err
		}
		no := false // a reply to a deleted message is still sent, as a plain message
		body.MessageReference = &discordgo.MessageReference{MessageID: out.ReplyTo, ChannelID: out.ChatID, FailIfNotExists: &no}
	}
	return a.postMessage(ctx, out.ChatID, body)
}

// postMessage creates the message body (a createMessage, with or without
// buttons) in the chat.
func (a *Adapter) postMessage(ctx context.Context, chatID string, body any) (adapters.Sent, error) {
	endpoint := discordgo.EndpointChannelMessages(chatID)
	resp, err := a.s.RequestWithBucketID("POST", endpoint, body, endpoint, discordgo.WithContext(ctx))
	if err != nil {
		return adapters.Sent{}, a.apiError("send message", err)
	}
	var m discordgo.Message
	if err := json.Unmarshal(resp, &m); err != nil || m.ID == "" {
		return adapters.Sent{}, fmt.Errorf("discord send message: the reply has no message id: %s", textcut.Bytes(string(resp), 200, "…"))
	}
	return adapters.Sent{MessageID: m.ID}, nil
}

// checkMessageIDs checks the ids of a message to change.
func checkMessageIDs(chatID, messageID string) error {
	if err := checkID("chat id", chatID); err != nil {
		return err
	}
	return checkID("message id", messageID)
}

// Edit implements adapters.Editor: it replaces a sent message's text.
func (a *Adapter) Edit(ctx context.Context, chatID, messageID, text string) error {
	if err := checkMessageIDs(chatID, messageID); err != nil {
		return err
	}
	if err := checkText(text); err != nil {
		return err
	}
	e := discordgo.NewMessageEdit(chatID, messageID).SetContent(text)
	e.AllowedMentions = allowedMentions
	if _, err := a.s.ChannelMessageEditComplex(e, discordgo.WithContext(ctx)); err != nil {
		return a.apiError("edit message", err)
	}
	return nil
}

// Typing implements adapters.Typer: "is typing…" in the chat for about
// ten seconds, or until the bot sends.
func (a *Adapter) Typing(ctx context.Context, chatID string) error {
	if err := checkID("chat id", chatID); err != nil {
		return err
	}
	if err := a.s.ChannelTyping(chatID, discordgo.WithContext(ctx)); err != nil {
		return a.apiError("typing", err)
	}
	return nil
}

// ErrTooLong means a text is longer than a Discord message may be; split
// it first (the gateway does, by MaxMessageLength).
var ErrTooLong = errors.New("message longer than Discord allows")

func checkText(text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("discord: empty message; Discord sends only messages with text")
	}
	if !utf8.ValidString(text) {
		return errors.New("discord: message text is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(text); n > MaxMessageLength {
		return fmt.Errorf("discord: %w: %d characters, at most %d", ErrTooLong, n, MaxMessageLength)
	}
	return nil
}

// checkID refuses anything but a snowflake, so an id can't reach another
// path of the API.
func checkID(what, id string) error {
	if id == "" || len(id) > 20 {
		return fmt.Errorf("discord: %s %q is not a Discord id", what, id)
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return fmt.Errorf("discord: %s %q is not a Discord id (digits only)", what, id)
		}
	}
	return nil
}

// APIError is an error reply from Discord's REST API.
type APIError struct {
	Op      string // what was being done, e.g. "send message"
	Status  int    // the HTTP status
	Code    int    // Discord's JSON error code, e.g. 50013 Missing Permissions
	Message string // Discord's message
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("discord %s: HTTP %d", e.Op, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Code != 0 {
		msg += fmt.Sprintf(" (code %d)", e.Code)
	}
	switch e.Status {
	case 401:
		msg += "; Discord refused the bot token: check the adapter's token (developer portal → Bot → Reset Token)"
	case 403:
		msg += "; the bot lacks a permission in this channel (View Channel, Send Messages, Send Messages in Threads, Read Message History)"
	}
	return msg
}

// apiError turns discordgo's errors into ours: a 429 into
// adapters.RateLimitError, a REST error into *APIError (discordgo's keeps
// the request, whose header holds the token), anything else with the token
// taken out of its text.
func (a *Adapter) apiError(op string, err error) error {
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
		return &adapters.RateLimitError{RetryAfter: rl.RetryAfter}
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) {
		e := &APIError{Op: op}
		if re.Response != nil {
			e.Status = re.Response.StatusCode
		}
		if re.Message != nil {
			e.Code, e.Message = re.Message.Code, re.Message.Message
		} else {
			e.Message = textcut.Bytes(string(re.ResponseBody), 200, "…")
		}
		e.Message = redactString(e.Message, a.token.Reveal())
		return e
	}
	if errors.Is(err, adapters.ErrDeadlinePassed) {
		return fmt.Errorf("discord %s: %w", op, adapters.ErrDeadlinePassed)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("discord %s: %w", op, err)
	}
	return fmt.Errorf("discord %s: %w", op, redact(err, a.token))
}

// MaxUploadBytes is the largest file a bot may attach in a server
// without boosts.
const MaxUploadBytes = 10 << 20

var _ adapters.FileSender = (*Adapter)(nil)

// MaxFileBytes implements adapters.FileSender.
func (a *Adapter) MaxFileBytes() int64 { return MaxUploadBytes }

// SendFile implements adapters.FileSender: the file as an attachment
// (Discord shows an image inline), with out.Text as the message's text.
func (a *Adapter) SendFile(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	if out.File == nil {
		return a.Send(ctx, out)
	}
	if err := checkID("chat id", out.ChatID); err != nil {
		return adapters.Sent{}, err
	}
	if len(out.File.Data) > MaxUploadBytes {
		return adapters.Sent{}, fmt.Errorf("discord: %s is %d bytes; bots attach at most %d: %w", out.File.Name, len(out.File.Data), MaxUploadBytes, adapters.ErrTooLarge)
	}
	msg := &discordgo.MessageSend{Content: textcut.Runes(out.Text, MaxMessageLength, "…"), AllowedMentions: allowedMentions,
		Files: []*discordgo.File{{Name: out.File.Name, ContentType: out.File.MediaType, Reader: bytes.NewReader(out.File.Data)}}}
	if out.ReplyTo != "" && checkID("reply_to message id", out.ReplyTo) == nil {
		no := false
		msg.Reference = &discordgo.MessageReference{MessageID: out.ReplyTo, ChannelID: out.ChatID, FailIfNotExists: &no}
	}
	m, err := a.s.ChannelMessageSendComplex(out.ChatID, msg, discordgo.WithContext(ctx))
	if err != nil {
		return adapters.Sent{}, a.apiError("send file", err)
	}
	return adapters.Sent{MessageID: m.ID}, nil
}
