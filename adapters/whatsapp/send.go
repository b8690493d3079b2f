package whatsapp

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/parleyd/parley/adapters"
)

// rateLimitWait is how long to hold off after WhatsApp says "rate
// overlimit"; it gives no figure of its own.
const rateLimitWait = 30 * time.Second

// Send sends out.Text to the chat out.ChatID names (see parseChatID). A
// ReplyTo of a message this process received is sent as a quoted reply.
// An IdempotencyKey makes the WhatsApp message id, so a send repeated
// after a timeout carries the same id and the recipient's app shows it
// once.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	to, err := parseChatID(out.ChatID)
	if err != nil {
		return adapters.Sent{}, err
	}
	if strings.TrimSpace(out.Text) == "" {
		return adapters.Sent{}, errors.New("whatsapp: refusing to send an empty message")
	}
	c := a.client()
	if c == nil {
		_, detail := a.Health()
		return adapters.Sent{}, fmt.Errorf("%w (%s)", ErrNotConnected, detail)
	}
	msg := &waE2E.Message{Conversation: proto.String(out.Text)}
	if out.ReplyTo != "" {
		if q, ok := a.quotes.get(out.ChatID, out.ReplyTo); ok {
			msg = &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
				Text: proto.String(out.Text),
				ContextInfo: &waE2E.ContextInfo{
					StanzaID:      proto.String(out.ReplyTo),
					Participant:   proto.String(q.sender.String()),
					QuotedMessage: &waE2E.Message{Conversation: proto.String(q.text)},
				},
			}}
		}
	}
	var extra []whatsmeow.SendRequestExtra
	if out.IdempotencyKey != "" {
		extra = append(extra, whatsmeow.SendRequestExtra{ID: messageID(a.id, out.IdempotencyKey)})
	}
	resp, err := c.SendMessage(ctx, to, msg, extra...)
	if err != nil {
		return adapters.Sent{}, sendError(err)
	}
	return adapters.Sent{MessageID: resp.ID}, nil
}

// MaxUploadBytes is the largest file WhatsApp carries as a document;
// maxImageBytes the largest it shows as an image (a larger one goes as a
// document).
const (
	MaxUploadBytes = 100 << 20
	maxImageBytes  = 16 << 20
)

var _ adapters.FileSender = (*Adapter)(nil)

// MaxFileBytes implements adapters.FileSender.
func (a *Adapter) MaxFileBytes() int64 { return MaxUploadBytes }

// SendFile implements adapters.FileSender: a JPEG or PNG image as an
// image message, anything else as a document, out.Text as the caption,
// uploaded to WhatsApp's media servers first. The idempotency key makes
// the message id, as Send's does.
func (a *Adapter) SendFile(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	if out.File == nil {
		return a.Send(ctx, out)
	}
	to, err := parseChatID(out.ChatID)
	if err != nil {
		return adapters.Sent{}, err
	}
	c := a.client()
	if c == nil {
		_, detail := a.Health()
		return adapters.Sent{}, fmt.Errorf("%w (%s)", ErrNotConnected, detail)
	}
	f := out.File
	if len(f.Data) > MaxUploadBytes {
		return adapters.Sent{}, fmt.Errorf("whatsapp: %s is %d bytes; WhatsApp carries files of at most %d: %w", f.Name, len(f.Data), MaxUploadBytes, adapters.ErrTooLarge)
	}
	typ, _, _ := strings.Cut(strings.ToLower(f.MediaType), ";")
	typ = strings.TrimSpace(typ)
	image := (typ == "image/jpeg" || typ == "image/png") && len(f.Data) <= maxImageBytes
	kind := whatsmeow.MediaDocument
	switch {
	case f.Voice:
		kind = whatsmeow.MediaAudio
	case image:
		kind = whatsmeow.MediaImage
	}
	up, err := c.Upload(ctx, f.Data, kind)
	if err != nil {
		return adapters.Sent{}, sendError(err)
	}
	var caption *string
	if strings.TrimSpace(out.Text) != "" {
		caption = proto.String(out.Text)
	}
	var msg *waE2E.Message
	switch {
	case f.Voice:
		// A voice note: push-to-talk Ogg Opus audio, shown with a play
		// button; it takes no caption.
		msg = &waE2E.Message{AudioMessage: &waE2E.AudioMessage{PTT: proto.Bool(true), Mimetype: proto.String("audio/ogg; codecs=opus"),
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength)}}
	case image:
		msg = &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Caption: caption, Mimetype: proto.String(typ),
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength)}}
	default:
		msg = &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{Caption: caption, Mimetype: proto.String(cmp.Or(typ, "application/octet-stream")),
			FileName: proto.String(f.Name), Title: proto.String(f.Name),
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength)}}
	}
	var extra []whatsmeow.SendRequestExtra
	if out.IdempotencyKey != "" {
		extra = append(extra, whatsmeow.SendRequestExtra{ID: messageID(a.id, out.IdempotencyKey)})
	}
	resp, err := c.SendMessage(ctx, to, msg, extra...)
	if err != nil {
		return adapters.Sent{}, sendError(err)
	}
	return adapters.Sent{MessageID: resp.ID}, nil
}

// messageID is a WhatsApp-style message id ("3EB0" and 18 hex digits,
// as whatsmeow makes them) derived from an idempotency key.
func messageID(id adapters.ID, key string) types.MessageID {
	sum := sha256.Sum256([]byte(string(id) + "\x00" + key))
	return whatsmeow.WebMessageIDPrefix + strings.ToUpper(hex.EncodeToString(sum[:9]))
}

// sendError maps WhatsApp's "slow down" answers to *adapters.RateLimitError.
func sendError(err error) error {
	if errors.Is(err, whatsmeow.ErrIQRateOverLimit) {
		return fmt.Errorf("whatsapp send: %w: %w", &adapters.RateLimitError{RetryAfter: rateLimitWait}, err)
	}
	if errors.Is(err, whatsmeow.ErrServerReturnedError) {
		// whatsmeow words it "server returned error <code>".
		fields := strings.Fields(err.Error())
		if len(fields) > 0 && fields[len(fields)-1] == strconv.Itoa(http.StatusTooManyRequests) {
			return fmt.Errorf("whatsapp send: %w: %w", &adapters.RateLimitError{RetryAfter: rateLimitWait}, err)
		}
	}
	return fmt.Errorf("whatsapp send: %w", err)
}

// Typing implements adapters.Typer: "typing…" in the chat, which WhatsApp
// shows for about 25 seconds or until the reply arrives. It does nothing
// when presence is off in the config.
func (a *Adapter) Typing(ctx context.Context, chatID string) error {
	if !a.cfg.presence {
		return nil
	}
	to, err := parseChatID(chatID)
	if err != nil {
		return err
	}
	c := a.client()
	if c == nil {
		return ErrNotConnected
	}
	if err := c.SendChatPresence(ctx, to, types.ChatPresenceComposing, types.ChatPresenceMediaText); err != nil {
		return fmt.Errorf("whatsapp typing: %w", err)
	}
	return nil
}

// Fetch implements adapters.Fetcher: it downloads and decrypts the media
// a file reference from this adapter points at.
func (a *Adapter) Fetch(ctx context.Context, f adapters.FileRef, maxBytes int64) ([]byte, string, error) {
	if maxBytes > 0 && f.Size > maxBytes {
		return nil, "", fmt.Errorf("whatsapp file %s is %d bytes, over %d: %w", f.Name, f.Size, maxBytes, adapters.ErrTooLarge)
	}
	m, err := decodeMedia(f.ID)
	if err != nil {
		return nil, "", err
	}
	c := a.client()
	if c == nil {
		return nil, "", ErrNotConnected
	}
	data, err := c.Download(ctx, m)
	if err != nil {
		return nil, "", fmt.Errorf("whatsapp file download: %w", err)
	}
	return adapters.Fetched("whatsapp file "+f.Name, data, f.MediaType, maxBytes)
}

// quote is what a reply needs to show the message it quotes.
type quote struct {
	sender types.JID
	text   string
}

// quoteCache remembers the last n messages received, by chat and id.
type quoteCache struct {
	mu    sync.Mutex
	n     int
	items map[string]quote
	order []string // oldest first
}

func newQuoteCache(n int) *quoteCache { return &quoteCache{n: n, items: map[string]quote{}} }

func (q *quoteCache) put(chatID, msgID string, v quote) {
	k := chatID + "\x00" + msgID
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.items[k]; !ok {
		q.order = append(q.order, k)
	}
	q.items[k] = v
	for len(q.order) > q.n {
		delete(q.items, q.order[0])
		q.order = q.order[1:]
	}
}

func (q *quoteCache) get(chatID, msgID string) (quote, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	v, ok := q.items[chatID+"\x00"+msgID]
	return v, ok
}
