// Package telegramtest is a fake Telegram Bot API for tests and
// benchmarks: an httptest server that answers getMe, getUpdates (long
// polling, offsets confirmed as Telegram does), sendMessage,
// sendChatAction, editMessageText, setMessageReaction, sendDocument,
// sendPhoto, sendVoice (multipart uploads, kept with their bytes),
// setWebhook, deleteWebhook, getWebhookInfo and getFile with the Bot
// API's JSON, and fails calls on
// request (429 with retry_after, 400, 401, dropped connections).
//
//	srv := telegramtest.NewServer()
//	defer srv.Close()
//	// adapter config: token: telegramtest.Token, api_endpoint: srv.Endpoint()
//	srv.InjectText(42, 42, "hello")
//	sent, err := srv.WaitSent(ctx, 1)
package telegramtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The bot the fake answers for by default.
const (
	Token       = "123456789:AAHfakeTokenForParleyTests_0123456789"
	BotID       = 123456789
	BotUsername = "parley_test_bot"
)

// Bot is the fake's bot account, as getMe returns it.
var Bot = User{ID: BotID, IsBot: true, FirstName: "Parley", Username: BotUsername}

// Failure is an answer the fake gives instead of the real one.
type Failure struct {
	Code        int    // error_code, e.g. 429, 400, 401; also the HTTP status
	Description string // e.g. "Too Many Requests: retry after 3"
	RetryAfter  int    // parameters.retry_after, in seconds
	MigrateTo   int64  // parameters.migrate_to_chat_id
	// Drop closes the connection without an answer, as a network failure.
	Drop bool
}

// Poll is one getUpdates call as the fake received it.
type Poll struct {
	Offset, Limit, Timeout int
	AllowedUpdates         string
}

// SentMessage is one sendMessage the fake accepted.
type SentMessage struct {
	MessageID int
	ChatID    string
	ThreadID  int // message_thread_id, 0 if none
	Text      string
	ParseMode string
	ReplyTo   int // reply_to_message_id, 0 if none
}

// EditedMessage is one editMessageText the fake accepted.
type EditedMessage struct {
	ChatID    string
	MessageID int
	Text      string
	ParseMode string
}

// ChatAction is one sendChatAction.
type ChatAction struct {
	ChatID   string
	ThreadID int
	Action   string
}

// WebhookInfo is the webhook the fake has been given.
type WebhookInfo struct {
	URL, SecretToken, AllowedUpdates string
}

type stored struct {
	id  int
	raw []byte
}

// Server is the fake Bot API. Its methods are safe for concurrent use.
type Server struct {
	// URL is the server's base address, e.g. http://127.0.0.1:41234.
	URL string
	// Token is the only token it accepts; others get 401 Unauthorized.
	Token string

	srv     *httptest.Server
	closing chan struct{} // closed by Close, to end long polls

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced on every change
	pending     []stored      // ascending update ids, not yet confirmed
	nextUpdate  int
	confirmed   int // every update below it is gone
	polls       []Poll
	sent        []SentMessage
	edits       []EditedMessage
	actions     []ChatAction
	texts       map[string]map[int]string // chat id -> message id -> text, for edits
	nextMessage map[string]int
	webhook     WebhookInfo
	failures    map[string][]Failure
	files       map[string][]byte
	uploads     []SentFile // uploads: sendDocument, sendPhoto, sendVoice
	calls       map[string]int
	markups     map[string]map[int][][]Button // chat id -> message id -> its inline keyboard
	callbacks   map[string]bool               // callback query ids given and not yet answered
	nextQuery   int
	answers     []CallbackAnswer
	reactions   map[string]map[int][]string // chat id -> message id -> the bot's reactions
	reactionLog []Reaction

	// polling ends the long poll in flight, if any: Telegram answers
	// the older of two concurrent getUpdates with 409 Conflict.
	polling   chan struct{}
	conflicts []time.Time

	sentCount atomic.Int64
	editCount atomic.Int64
}

// Conflicts are the times a getUpdates was cut short by another one
// (409 Conflict): two pollers of one bot at once.
func (s *Server) Conflicts() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.conflicts...)
}

// NewServer starts a fake that accepts Token.
func NewServer() *Server {
	s := &Server{
		Token:       Token,
		closing:     make(chan struct{}),
		changed:     make(chan struct{}),
		nextUpdate:  1000,
		texts:       map[string]map[int]string{},
		nextMessage: map[string]int{},
		failures:    map[string][]Failure{},
		files:       map[string][]byte{},
		calls:       map[string]int{},
		markups:     map[string]map[int][][]Button{},
		callbacks:   map[string]bool{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close ends the long polls in progress and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	s.mu.Unlock()
	s.srv.Close()
}

// Endpoint is the api_endpoint format for the adapter's config.
func (s *Server) Endpoint() string { return s.URL + "/bot%s/%s" }

// ConfigYAML is the adapter config section that points at the fake, for
// a Decoder or a config file (indent it under the adapter's entry).
func (s *Server) ConfigYAML() string {
	return fmt.Sprintf("token: %q\napi_endpoint: %q\n", s.Token, s.Endpoint())
}

// Client is an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// broadcast wakes every waiter; call it with mu held.
func (s *Server) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Inject queues an update for getUpdates. An UpdateID of 0 is given the
// next one; it returns the id.
func (s *Server) Inject(u Update) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.UpdateID == 0 {
		u.UpdateID = s.nextUpdate
	}
	s.nextUpdate = max(s.nextUpdate, u.UpdateID+1)
	raw, err := json.Marshal(u)
	if err != nil {
		panic("telegramtest: " + err.Error())
	}
	s.insert(stored{u.UpdateID, raw})
	return u.UpdateID
}

// InjectRaw queues an update given as JSON, which must have an update_id.
func (s *Server) InjectRaw(raw []byte) {
	var head struct {
		UpdateID int `json:"update_id"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.UpdateID == 0 {
		panic("telegramtest: InjectRaw needs JSON with an update_id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextUpdate = max(s.nextUpdate, head.UpdateID+1)
	s.insert(stored{head.UpdateID, bytes.Clone(raw)})
}

// noteQueryLocked lets the press an update carries, if any, be answered
// once (answerCallbackQuery), as Telegram does for the updates it sends.
func (s *Server) noteQueryLocked(raw []byte) {
	var q struct {
		CallbackQuery *struct {
			ID string `json:"id"`
		} `json:"callback_query"`
	}
	if json.Unmarshal(raw, &q) == nil && q.CallbackQuery != nil && q.CallbackQuery.ID != "" {
		s.callbacks[q.CallbackQuery.ID] = true
	}
}

func (s *Server) insert(u stored) {
	s.noteQueryLocked(u.raw)
	i := len(s.pending)
	for i > 0 && s.pending[i-1].id > u.id {
		i--
	}
	s.pending = append(s.pending, stored{})
	copy(s.pending[i+1:], s.pending[i:])
	s.pending[i] = u
	s.broadcast()
}

// InjectText queues a text message from user userID in chat chatID: a
// private chat when the two are equal, else a supergroup. Message ids
// count up per chat. It returns the update id.
func (s *Server) InjectText(chatID, userID int64, text string) int {
	chat := Chat{ID: chatID, Type: "private", FirstName: "User"}
	if chatID != userID {
		chat = Chat{ID: chatID, Type: "supergroup", Title: "Group"}
	}
	return s.Inject(Update{Message: &Message{
		MessageID: s.NextMessageID(strconv.FormatInt(chatID, 10)),
		From:      &User{ID: userID, FirstName: "User", Username: "user" + strconv.FormatInt(userID, 10)},
		Chat:      chat,
		Date:      time.Now().Unix(),
		Text:      text,
	}})
}

// InjectEdit queues an edit of message messageID, from user userID in
// chat chatID (as InjectText sends), to text. It returns the update id.
func (s *Server) InjectEdit(chatID, userID int64, messageID int, text string) int {
	chat := Chat{ID: chatID, Type: "private", FirstName: "User"}
	if chatID != userID {
		chat = Chat{ID: chatID, Type: "supergroup", Title: "Group"}
	}
	now := time.Now().Unix()
	return s.Inject(Update{EditedMessage: &Message{
		MessageID: messageID,
		From:      &User{ID: userID, FirstName: "User", Username: "user" + strconv.FormatInt(userID, 10)},
		Chat:      chat,
		Date:      now,
		EditDate:  now + int64(s.editCount.Add(1)), // each edit its own date
		Text:      text,
	}})
}

// fileMessage is a new message from user userID in chat chatID (a private
// chat when the two are equal, else a supergroup, a forum when thread is
// not 0) carrying data, stored under a new file id of kind as a file the
// bot can fetch with getFile; the caller sets the field that carries it.
func (s *Server) fileMessage(chatID, userID int64, thread int, kind string, data []byte) (*Message, string) {
	chat := Chat{ID: chatID, Type: "private", FirstName: "User"}
	if chatID != userID {
		chat = Chat{ID: chatID, Type: "supergroup", Title: "Group", IsForum: thread != 0}
	}
	id := s.NextMessageID(strconv.FormatInt(chatID, 10))
	fileID := fmt.Sprintf("%s-%d-%d", kind, chatID, id)
	s.AddFile(fileID, data)
	return &Message{
		MessageID:       id,
		MessageThreadID: thread,
		IsTopicMessage:  thread != 0,
		From:            &User{ID: userID, FirstName: "User", Username: "user" + strconv.FormatInt(userID, 10)},
		Chat:            chat,
		Date:            time.Now().Unix(),
	}, fileID
}

// InjectVoice queues a voice note of audio (stored as a file the bot can
// fetch) from user userID in chat: a private chat when the two are equal,
// else a supergroup; thread, when not 0, is the forum topic it is in. It
// returns the update id.
func (s *Server) InjectVoice(chatID, userID int64, thread int, audio []byte) int {
	m, fileID := s.fileMessage(chatID, userID, thread, "voice", audio)
	m.Voice = &Voice{FileID: fileID, FileUniqueID: "u" + fileID, Duration: 3, MimeType: "audio/ogg", FileSize: len(audio)}
	return s.Inject(Update{Message: m})
}

// InjectPhoto queues a photo (data, stored as a file the bot can fetch
// with getFile) with caption from user userID in chat chatID, as
// InjectText does. It returns the update id.
func (s *Server) InjectPhoto(chatID, userID int64, data []byte, caption string) int {
	m, fileID := s.fileMessage(chatID, userID, 0, "photo", data)
	m.Caption = caption
	m.Photo = []PhotoSize{{FileID: fileID, FileUniqueID: "u" + fileID, Width: 8, Height: 8, FileSize: len(data)}}
	return s.Inject(Update{Message: m})
}

// InjectDocument queues a document (data, stored as a file the bot can
// fetch with getFile) named name, of mediaType, with caption, from user
// userID in chat chatID, as InjectText does. It returns the update id.
func (s *Server) InjectDocument(chatID, userID int64, name, mediaType string, data []byte, caption string) int {
	m, fileID := s.fileMessage(chatID, userID, 0, "document", data)
	m.Caption = caption
	m.Document = &Document{FileID: fileID, FileUniqueID: "u" + fileID, FileName: name, MimeType: mediaType, FileSize: len(data)}
	return s.Inject(Update{Message: m})
}

// NextMessageID hands out the next message id of a chat, shared with the
// ids sendMessage gives, as in one Telegram chat.
func (s *Server) NextMessageID(chatID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextMessageLocked(chatID)
}

func (s *Server) nextMessageLocked(chatID string) int {
	s.nextMessage[chatID]++
	return s.nextMessage[chatID]
}

// Fail makes the next calls of method answer f instead, once per call
// of Fail, in order.
func (s *Server) Fail(method string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f)
}

// ClearFailures drops the failures not yet given.
func (s *Server) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.failures)
}

// AddFile makes a file available to getFile and the file endpoint.
func (s *Server) AddFile(fileID string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[fileID] = bytes.Clone(data)
}

// Sent returns the messages sent so far.
func (s *Server) Sent() []SentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SentMessage(nil), s.sent...)
}

// SentSince returns the messages sent after the first n.
func (s *Server) SentSince(n int) []SentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= len(s.sent) {
		return nil
	}
	return append([]SentMessage(nil), s.sent[max(n, 0):]...)
}

// SentCount is how many messages were sent; it takes no lock.
func (s *Server) SentCount() int { return int(s.sentCount.Load()) }

// Edits returns the edits so far.
func (s *Server) Edits() []EditedMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EditedMessage(nil), s.edits...)
}

// Actions returns the chat actions so far.
func (s *Server) Actions() []ChatAction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ChatAction(nil), s.actions...)
}

// Polls returns the getUpdates calls so far.
func (s *Server) Polls() []Poll {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Poll(nil), s.polls...)
}

// Confirmed is the highest offset a getUpdates carried: the updates
// below it are acknowledged and gone.
func (s *Server) Confirmed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// Pending is how many updates are not yet confirmed.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Webhook returns the webhook set, if any.
func (s *Server) Webhook() WebhookInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook
}

// Calls is how many times method was called (failed calls included).
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// WaitFor waits until cond returns true or ctx ends. cond runs without
// the server's lock (it may call the methods above), after every change.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitSent waits until at least n messages were sent, and returns them.
func (s *Server) WaitSent(ctx context.Context, n int) ([]SentMessage, error) {
	err := s.WaitFor(ctx, func() bool { return s.SentCount() >= n })
	sent := s.Sent()
	if err != nil {
		return sent, fmt.Errorf("telegramtest: %d of %d messages sent: %w", len(sent), n, err)
	}
	return sent, nil
}

// WaitPolls waits until getUpdates was called at least n times.
func (s *Server) WaitPolls(ctx context.Context, n int) ([]Poll, error) {
	err := s.WaitFor(ctx, func() bool { return s.Calls("getUpdates") >= n })
	polls := s.Polls()
	if err != nil {
		return polls, fmt.Errorf("telegramtest: %d of %d getUpdates calls: %w", len(polls), n, err)
	}
	return polls, nil
}

// WebhookRequest builds the request Telegram makes to a webhook: a POST
// of the update's JSON with the secret token header (none if empty).
func WebhookRequest(target, secret string, u Update) *http.Request {
	body, err := json.Marshal(u)
	if err != nil {
		panic("telegramtest: " + err.Error())
	}
	req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	return req
}

// PostWebhook does what Telegram does with an update when a webhook is
// set: it posts it to the webhook's URL with its secret token, and
// returns the HTTP status.
func (s *Server) PostWebhook(ctx context.Context, u Update) (int, error) {
	wh := s.Webhook()
	if wh.URL == "" {
		return 0, fmt.Errorf("telegramtest: no webhook set")
	}
	body, err := json.Marshal(u)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.noteQueryLocked(body)
	s.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if wh.SecretToken != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", wh.SecretToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
