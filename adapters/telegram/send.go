package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/adapters"
)

// Send posts one message, into its forum topic if ChatID names one, as a
// reply to out.ReplyTo if set. Text longer than a Telegram message (4096
// UTF-16 units, which a 4096-rune chunk of emoji can pass) goes as several
// messages, and Sent names the last. It is formatted per parse_mode, and
// sent again as plain text if Telegram can't parse the formatting.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	chat, thread, err := parseChatID(out.ChatID)
	if err != nil {
		return adapters.Sent{}, err
	}
	if strings.TrimSpace(out.Text) == "" {
		return adapters.Sent{}, errors.New("telegram: empty message; Telegram sends only text with something in it")
	}
	var sent adapters.Sent
	for i, piece := range splitMessage(out.Text, MaxMessageLength) {
		params := tgbotapi.Params{"chat_id": chat}
		params.AddNonZero("message_thread_id", thread)
		if i == 0 && out.ReplyTo != "" {
			params["reply_to_message_id"] = out.ReplyTo
			// A reply whose original was deleted still goes out.
			params["allow_sending_without_reply"] = "true"
		}
		raw, err := a.sendText(ctx, "sendMessage", params, piece)
		if err != nil {
			return sent, err
		}
		var m tgbotapi.MessageID
		if err := json.Unmarshal(raw, &m); err != nil || m.MessageID == 0 {
			return sent, fmt.Errorf("telegram sendMessage: the answer has no message_id")
		}
		sent.MessageID = strconv.Itoa(m.MessageID)
	}
	return sent, nil
}

// Bot API upload limits: a bot sends files of at most 50 MB, photos of at
// most 10 MB (a larger image goes as a document), and captions of at most
// 1024 characters.
const (
	MaxUploadBytes  = 50 << 20
	maxPhotoBytes   = 10 << 20
	maxCaptionRunes = 1024
)

var _ adapters.FileSender = (*Adapter)(nil)

// MaxFileBytes implements adapters.FileSender.
func (a *Adapter) MaxFileBytes() int64 { return MaxUploadBytes }

// SendFile implements adapters.FileSender: a JPEG, PNG or WebP image up to
// 10 MB with sendPhoto (Telegram shows it), anything else with
// sendDocument, out.Text as the caption, into the forum topic ChatID names.
func (a *Adapter) SendFile(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	if out.File == nil {
		return a.Send(ctx, out)
	}
	chat, thread, err := parseChatID(out.ChatID)
	if err != nil {
		return adapters.Sent{}, err
	}
	f := out.File
	if len(f.Data) > MaxUploadBytes {
		return adapters.Sent{}, fmt.Errorf("telegram: %s is %d bytes; bots send files of at most %d bytes: %w", f.Name, len(f.Data), MaxUploadBytes, adapters.ErrTooLarge)
	}
	method, field := "sendDocument", "document"
	switch {
	case f.Voice:
		method, field = "sendVoice", "voice"
	case photoType(f.MediaType) && len(f.Data) <= maxPhotoBytes:
		method, field = "sendPhoto", "photo"
	}
	params := tgbotapi.Params{"chat_id": chat}
	params.AddNonZero("message_thread_id", thread)
	if caption := strings.TrimSpace(out.Text); caption != "" {
		if utf8.RuneCountInString(caption) > maxCaptionRunes {
			caption = string([]rune(caption)[:maxCaptionRunes-1]) + "…"
		}
		params["caption"] = caption
	}
	if out.ReplyTo != "" {
		params["reply_to_message_id"] = out.ReplyTo
		params["allow_sending_without_reply"] = "true"
	}
	raw, err := a.api.upload(ctx, method, params, field, tgbotapi.FileBytes{Name: f.Name, Bytes: f.Data})
	if err != nil {
		return adapters.Sent{}, err
	}
	var m tgbotapi.MessageID
	if err := json.Unmarshal(raw, &m); err != nil || m.MessageID == 0 {
		return adapters.Sent{}, fmt.Errorf("telegram %s: the answer has no message_id", method)
	}
	return adapters.Sent{MessageID: strconv.Itoa(m.MessageID)}, nil
}

// photoType reports whether Telegram shows an image of this type as a photo.
func photoType(mediaType string) bool {
	typ, _, _ := strings.Cut(strings.ToLower(mediaType), ";")
	switch strings.TrimSpace(typ) {
	case "image/jpeg", "image/png", "image/webp":
		return true
	}
	return false
}

// Edit implements adapters.Editor with editMessageText. An edit that
// changes nothing is not an error.
func (a *Adapter) Edit(ctx context.Context, chatID, messageID, text string) error {
	chat, _, err := parseChatID(chatID)
	if err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return errors.New("telegram: empty text; an edit needs something in it")
	}
	if n := utf16Len(text); n > MaxMessageLength {
		return fmt.Errorf("telegram: text is %d characters; one message holds at most %d, so send the rest as new messages", n, MaxMessageLength)
	}
	params := tgbotapi.Params{"chat_id": chat, "message_id": messageID}
	_, err = a.sendText(ctx, "editMessageText", params, text)
	var ae *APIError
	if errors.As(err, &ae) && strings.Contains(ae.Description, "message is not modified") {
		return nil
	}
	return err
}

// Typing implements adapters.Typer: Telegram shows "typing…" for about
// five seconds, or until a message is sent.
func (a *Adapter) Typing(ctx context.Context, chatID string) error {
	chat, thread, err := parseChatID(chatID)
	if err != nil {
		return err
	}
	params := tgbotapi.Params{"chat_id": chat, "action": tgbotapi.ChatTyping}
	params.AddNonZero("message_thread_id", thread)
	_, err = a.api.call(ctx, "sendChatAction", params)
	return err
}

// sendText calls method with text formatted per parse_mode, then, if
// Telegram can't parse that, with the text as written and no parse mode.
func (a *Adapter) sendText(ctx context.Context, method string, params tgbotapi.Params, text string) (json.RawMessage, error) {
	if formatted, mode := format(a.cfg.parseMode, text); mode != "" {
		p := maps.Clone(params)
		p["text"], p["parse_mode"] = formatted, mode
		raw, err := a.api.call(ctx, method, p)
		if err == nil || !isParseError(err) {
			return raw, err
		}
		a.log.DebugContext(ctx, "telegram could not parse the formatting; sending plain text", "call", method, "parse_mode", mode, "error", err)
	}
	p := maps.Clone(params)
	p["text"] = text
	return a.api.call(ctx, method, p)
}

// isParseError reports Telegram's 400 for formatting it can't parse
// ("Bad Request: can't parse entities: ...").
func isParseError(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == http.StatusBadRequest &&
		strings.Contains(strings.ToLower(ae.Description), "can't parse")
}

// utf16Len is the length Telegram counts: UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// splitMessage keeps text whole when it fits, and otherwise splits it
// with adapters.Chunk, tightening the rune limit until every piece fits in
// limit UTF-16 units.
func splitMessage(text string, limit int) []string {
	if utf16Len(text) <= limit {
		return []string{text}
	}
	for n := min(limit, utf8.RuneCountInString(text)); ; n = max(1, n*7/8) {
		pieces := adapters.Chunk(text, n)
		fits := true
		for _, p := range pieces {
			if utf16Len(p) > limit {
				fits = false
				break
			}
		}
		if fits || n == 1 {
			return pieces
		}
	}
}

// maxDownloadBytes is the largest file the Bot API lets a bot download.
const maxDownloadBytes = 20 << 20

// OpenFile streams the file a FileRef of this adapter points at: getFile,
// then a download from the file endpoint next to api_endpoint (Telegram
// serves bots files of up to 20 MB). The caller closes it and limits what
// it reads.
func (a *Adapter) OpenFile(ctx context.Context, ref adapters.FileRef) (io.ReadCloser, error) {
	return a.openFile(ctx, ref, 0)
}

// Fetch implements adapters.Fetcher: a file over maxBytes (by the size
// the message or getFile gave, or else as it is read) is an error wrapping
// adapters.ErrTooLarge. The media type is the one the message gave, else
// sniffed from the content.
func (a *Adapter) Fetch(ctx context.Context, ref adapters.FileRef, maxBytes int64) ([]byte, string, error) {
	if maxBytes > 0 && ref.Size > maxBytes {
		return nil, "", fmt.Errorf("telegram file %s is %d bytes, over %d: %w", ref.ID, ref.Size, maxBytes, adapters.ErrTooLarge)
	}
	rc, err := a.openFile(ctx, ref, maxBytes)
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	r := io.Reader(rc)
	if maxBytes > 0 {
		r = io.LimitReader(rc, maxBytes+1)
	}
	// Read into room for the size the message gave (at most what Telegram
	// serves a bot), so the file is read without growing, and copying,
	// the buffer.
	buf := bytes.NewBuffer(make([]byte, 0, min(max(ref.Size, 0), maxDownloadBytes)+bytes.MinRead))
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, "", fmt.Errorf("telegram file download: %s", a.api.redact(err.Error()))
	}
	data := buf.Bytes()
	return adapters.Fetched("telegram file "+ref.ID, data, ref.MediaType, maxBytes)
}

// openFile asks getFile where the file is and opens the download,
// refusing one that getFile or the response says is over maxBytes (0:
// no limit).
func (a *Adapter) openFile(ctx context.Context, ref adapters.FileRef, maxBytes int64) (io.ReadCloser, error) {
	base, ok := strings.CutSuffix(a.cfg.endpoint, "/bot%s/%s")
	if !ok {
		return nil, fmt.Errorf("telegram: api_endpoint does not end in /bot%%s/%%s, so the file endpoint is unknown: %w", adapters.ErrUnsupported)
	}
	var f tgbotapi.File
	if err := a.api.callInto(ctx, "getFile", tgbotapi.Params{"file_id": ref.ID}, &f); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && strings.Contains(ae.Description, "file is too big") {
			return nil, fmt.Errorf("%w: %w", err, adapters.ErrTooLarge)
		}
		return nil, err
	}
	if maxBytes > 0 && int64(f.FileSize) > maxBytes {
		return nil, fmt.Errorf("telegram file %s is %d bytes, over %d: %w", ref.ID, f.FileSize, maxBytes, adapters.ErrTooLarge)
	}
	if f.FilePath == "" || strings.HasPrefix(f.FilePath, "/") {
		return nil, fmt.Errorf("telegram: getFile gave no downloadable path for %s (a local Bot API server gives its own disk path): %w", ref.ID, adapters.ErrUnsupported)
	}
	link := fmt.Sprintf(base+"/file/bot%s/%s", a.cfg.token.Reveal(), f.FilePath)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return nil, fmt.Errorf("telegram file: %s", a.api.redact(err.Error()))
	}
	resp, err := a.api.http.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("telegram file: %w", cerr)
		}
		return nil, &transportError{method: "file download", msg: a.api.redact(err.Error())}
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("telegram file download: HTTP %s", resp.Status)
	}
	if maxBytes > 0 && resp.ContentLength > maxBytes {
		resp.Body.Close()
		return nil, fmt.Errorf("telegram file %s is %d bytes, over %d: %w", ref.ID, resp.ContentLength, maxBytes, adapters.ErrTooLarge)
	}
	return resp.Body, nil
}
