// Package webhooks serves incoming webhooks at /hooks/{id}: it checks a
// request's auth, size and JSON, turns the payload into a prompt with the
// hook's template, and delivers it to the gateway like any channel's
// message, in a fresh session. The reply comes back through the outbox to
// Send, which records it, answers a waiting sync request and notifies the
// hook's targets.
package webhooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/signing"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/textcut"
)

// AdapterID is the adapter webhook deliveries arrive on and replies return to.
const AdapterID adapters.ID = "webhook"

// Pattern is the ServeMux pattern the hooks are served at, beside /v1.
const Pattern = "/hooks/{id}"

// Limits.
const (
	// MaxBody is the largest request body taken.
	MaxBody = 1 << 20
	// ReplayWindow is how far an hmac request's timestamp may be from now.
	ReplayWindow = 5 * time.Minute
	// maxPrompt bounds the rendered prompt.
	maxPrompt = 64 << 10
	// RetryAfterSeconds is the Retry-After of a 503: how soon to try again.
	RetryAfterSeconds = "5"
)

const (
	// An async delivery's answer (202) is known before it is recorded,
	// and is stored with it; a sync one's is stored once given (respond).
	insertDeliveryQuery = `INSERT INTO webhook_deliveries (id, hook_id, delivery_key, session_key, received_at, http_status, response)
	VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`

	deliveryByKeyQuery = `SELECT id, status, http_status, response, session_key FROM webhook_deliveries WHERE hook_id = $1 AND delivery_key = $2`

	respondedQuery = `UPDATE webhook_deliveries SET http_status = $2, response = $3 WHERE id = $1 AND http_status = 0`

	answeredQuery = `UPDATE webhook_deliveries SET status = $2, reply = $3, error = $4, completed_at = $5,
	duration_ms = $5 - received_at WHERE session_key = $1 AND status = 'accepted'`

	// A failed delivery is kept, with its key freed for the sender's retry
	// (its record may have gone with the failed transaction: write it).
	failedQuery = `INSERT INTO webhook_deliveries (id, hook_id, delivery_key, session_key, status, error, received_at, completed_at, http_status, response)
	VALUES ($1, $2, '', $3, 'failed', $4, $5, $5, $6, $7)
	ON CONFLICT (id) DO UPDATE SET status = 'failed', delivery_key = '', error = excluded.error, completed_at = excluded.completed_at,
	http_status = excluded.http_status, response = excluded.response`

	listDeliveriesQuery = `SELECT id, hook_id, delivery_key, status, http_status, session_key, reply, error, received_at, COALESCE(completed_at, 0), duration_ms
	FROM webhook_deliveries WHERE hook_id = $1 ORDER BY received_at DESC, id DESC LIMIT $2`
)

// txSink is the gateway's DeliverWith: the message and the delivery's
// record in one transaction.
type txSink interface {
	DeliverWith(ctx context.Context, in adapters.Inbound, also func(q dbutil.Querier) error) error
}

// errRepeat means the delivery key was seen before.
var errRepeat = errors.New("a repeated delivery")

// Notifier sends a reply to a notify target, "<adapter id>:<chat id>",
// under an idempotency key: a note sent again under the same key (the
// outbox's retry of Send) goes out once.
type Notifier func(ctx context.Context, target, text, key string, files ...adapters.OutFile) error

// Options configure a Server.
type Options struct {
	// OnDelivery, if set, hears of each delivery's status as it is set:
	// accepted, answered or failed (metrics).
	OnDelivery func(status string)
	// OnRefused, if set, hears of each refused request: the hook it named
	// ("" when no hook has that id) and the reason, the error code it was
	// answered with (unauthorized, stale, not_found, body_too_large...).
	OnRefused func(hook, reason string)
	Hooks     []config.Hook
	DB        *dbutil.DB
	Notify    Notifier
	// QueueNote queues a reply's note to a target inside the transaction
	// that stores the reply (Report), under the key Notify uses; nil
	// leaves the notes to Notify after the commit.
	// The files are those the reply carries (send_file), sent after its
	// text.
	QueueNote func(ctx context.Context, q dbutil.Querier, target, text, key string, files ...adapters.OutFile) error
	Log       *slog.Logger
	Now       func() time.Time
	// BodyTimeout bounds a request body's arrival; 0 means
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// MaxPendingBodies bounds one hook's bodies read at once before their
	// signatures can be checked; 0 means DefaultMaxPendingBodies.
	MaxPendingBodies int
}

// Server is the webhook endpoint and the "webhook" adapter.
type Server struct {
	opts  Options
	hooks atomic.Pointer[map[string]config.Hook] // replaced by SetHooks
	order atomic.Pointer[[]config.Hook]          // the same, in the config's order

	mu      sync.Mutex
	sink    adapters.Sink
	waiters map[string]chan string // by chat id, for sync hooks
	started chan struct{}

	slotsMu sync.Mutex
	slots   map[string]chan struct{} // by hook id: pending body reads

	refusalsMu sync.Mutex
	refusals   []Refusal // the latest, oldest first
}

var (
	_ adapters.Adapter  = (*Server)(nil)
	_ adapters.Declarer = (*Server)(nil)
)

// Source declares the server as a source of messages: a delivery reports
// to its hook's notify targets or its caller (Report), and nobody watches
// it, so its hook's allow_tools answers its permission questions.
func (s *Server) Source() adapters.Source {
	return adapters.Source{Name: "webhooks", Replies: adapters.RepliesReported, Asks: adapters.AskPolicy, Unattended: s.unattended,
		Started: func() []any { return []any{"hooks", len(*s.order.Load())} }}
}

// unattended is a delivery's answerer: its hook's allow_tools.
func (s *Server) unattended(chatID string) *permissions.Unattended {
	hookID, _, _ := strings.Cut(chatID, ":")
	u := &permissions.Unattended{What: fmt.Sprintf("webhook %q", hookID), Key: "allow_tools on the hook in the config"}
	for i, h := range *s.order.Load() {
		if h.ID == hookID {
			u.Key, u.Allow = fmt.Sprintf("hooks[%d].allow_tools", i), h.AllowTools
		}
	}
	return u
}

// New returns a Server for the configured hooks.
func New(opts Options) *Server {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.MaxPendingBodies <= 0 {
		opts.MaxPendingBodies = DefaultMaxPendingBodies
	}
	s := &Server{opts: opts, waiters: map[string]chan string{}, started: make(chan struct{})}
	s.SetHooks(opts.Hooks)
	return s
}

// SetHooks replaces the hooks, as a reload of the config does: a hook
// removed answers as unknown from now on; a delivery already taken goes on.
func (s *Server) SetHooks(hooks []config.Hook) {
	m := make(map[string]config.Hook, len(hooks))
	for _, h := range hooks {
		m[h.ID] = h
	}
	s.hooks.Store(&m)
	s.order.Store(&hooks)
}

// hook is the hook called id.
func (s *Server) hook(id string) (config.Hook, bool) {
	h, ok := (*s.hooks.Load())[id]
	return h, ok
}

// Start takes the sink deliveries go to and waits for ctx to end.
func (s *Server) Start(ctx context.Context, sink adapters.Sink) error {
	s.mu.Lock()
	s.sink = sink
	select {
	case <-s.started:
	default:
		close(s.started)
	}
	s.mu.Unlock()
	s.sweepLoop(ctx)
	return nil
}

// apiError is the JSON error every failed request gets.
type apiError struct {
	status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func fail(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ServeHTTP handles POST /hooks/{id}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, before := s.guard(w, r)
	status, body := s.handle(r)
	if status >= 400 && status < 500 {
		s.refused(r, status, body)
	}
	before()
	w.Header().Set("Content-Type", "application/json")
	switch status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", RetryAfterSeconds)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", busyRetryAfter)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Server) handle(r *http.Request) (int, []byte) {
	id := r.PathValue("id")
	if id == "" {
		id = strings.TrimPrefix(r.URL.Path, "/hooks/")
	}
	hook, ok := s.hook(id)
	if !ok || r.Method != http.MethodPost {
		return errorBody(notFound())
	}
	body, e := s.readBody(hook, r)
	if e != nil {
		return errorBody(e)
	}
	if e := s.authenticate(hook, r.Header, body); e != nil {
		return errorBody(e)
	}
	if e := checkDeliveryKey(r.Header); e != nil {
		return errorBody(e)
	}
	var payload any
	if err := json.Unmarshal(body, &payload); err != nil {
		return errorBody(fail(http.StatusBadRequest, "bad_json", "the body is not JSON: %v", err))
	}
	var prompt bytes.Buffer
	if err := hook.Template().Execute(&limitedWriter{w: &prompt, n: maxPrompt}, payload); err != nil {
		return errorBody(fail(http.StatusBadRequest, "template_failed", "the payload doesn't fit the hook's prompt template: %v", err))
	}
	return s.deliver(r.Context(), hook, deliveryKey(r.Header), prompt.String(), s.replayKeys(hook, r.Header))
}

// refused logs a refused request, at warn, without its body (which may be
// anyone's), and counts it by hook and reason.
func (s *Server) refused(r *http.Request, status int, body []byte) {
	var e struct {
		Error apiError `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	hook := r.PathValue("id")
	if hook == "" {
		hook = strings.TrimPrefix(r.URL.Path, "/hooks/")
	}
	if _, ok := s.hook(hook); !ok {
		hook = "" // the path is the sender's: only a hook's id is logged or counted
	}
	s.opts.Log.WarnContext(r.Context(), "webhook request refused", "hook", hook, "reason", e.Error.Code, "status", status,
		"remote_addr", r.RemoteAddr, "content_length", r.ContentLength)
	if s.opts.OnRefused != nil {
		s.opts.OnRefused(hook, e.Error.Code)
	}
	s.keepRefusal(Refusal{At: s.opts.Now(), Hook: hook, Status: status, Reason: e.Error.Code, Remote: r.RemoteAddr})
}

func errorBody(e *apiError) (int, []byte) {
	b, _ := json.Marshal(map[string]*apiError{"error": e})
	return e.status, b
}

// authenticate checks the request against the hook's auth, in constant time.
func (s *Server) authenticate(h config.Hook, hdr http.Header, body []byte) *apiError {
	secret := []byte(h.Secret.Reveal())
	switch h.Auth {
	case "token":
		return checkToken(hdr, secret)
	case "github":
		if !signing.Valid(hdr.Get("X-Hub-Signature-256"), secret, body) {
			return fail(http.StatusUnauthorized, "unauthorized", "X-Hub-Signature-256 is missing or doesn't match the body; check the hook's secret")
		}
	default: // hmac
		ts, sig, e := s.hmacHeaders(hdr)
		if e != nil {
			return e
		}
		if !signing.Valid(sig, secret, append([]byte(ts+"."), body...)) {
			return fail(http.StatusUnauthorized, "unauthorized", "X-Parley-Signature doesn't match; sign timestamp + \".\" + body with the hook's secret")
		}
	}
	return nil
}

// deliveryKeyHeaders name a delivery, the first one set counting.
var deliveryKeyHeaders = []string{"X-Parley-Delivery", "X-GitHub-Delivery", "Idempotency-Key"}

// checkDeliveryKey refuses a delivery id that is not UTF-8 text: no engine
// would store it alike (PostgreSQL refuses it), and a retry would meet the
// same error forever.
func checkDeliveryKey(h http.Header) *apiError {
	for _, k := range deliveryKeyHeaders {
		if v := strings.TrimSpace(h.Get(k)); v != "" {
			if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				return fail(http.StatusBadRequest, "bad_delivery_id", "%s is not UTF-8 text; send an ASCII or UTF-8 id", k)
			}
			return nil
		}
	}
	return nil
}

func deliveryKey(h http.Header) string {
	for _, k := range deliveryKeyHeaders {
		if v := strings.TrimSpace(h.Get(k)); v != "" {
			return textcut.Bytes(v, 200, "")
		}
	}
	return ""
}

// deliver records the delivery and hands its prompt to the gateway. A
// repeat of a delivery key gets the first delivery's response.
func (s *Server) deliver(ctx context.Context, h config.Hook, key, prompt string, replay []replayKey) (int, []byte) {
	now := s.opts.Now()
	id := uuid.Must(uuid.NewV7()).String()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	chat := fmt.Sprintf("%s:%d-%s", h.ID, now.UnixMilli(), hex.EncodeToString(suffix))
	sessionKey := "webhook:" + chat
	// The delivery's record is written with the gateway's own record of the
	// message, in one transaction when the gateway can (one durable write
	// before the answer); a repeated delivery key undoes both.
	accepted := map[string]any{"delivery_id": id, "session_key": sessionKey, "status": "accepted"}
	answer, answerBody := 0, ""
	if h.Mode != "sync" {
		answer, answerBody = http.StatusAccepted, string(mustJSON(accepted))
	}
	record := func(q dbutil.Querier) error {
		res, err := q.ExecContext(ctx, insertDeliveryQuery, id, h.ID, key, sessionKey, dbutil.Millis(now), answer, answerBody)
		if err != nil {
			return fmt.Errorf("record the delivery: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errRepeat
		}
		return s.claimReplays(ctx, q, h.ID, replay)
	}
	var wait chan string
	if h.Mode == "sync" {
		wait = make(chan string, 1)
		s.mu.Lock()
		s.waiters[chat] = wait
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.waiters, chat)
			s.mu.Unlock()
		}()
	}
	in := adapters.Inbound{Adapter: AdapterID, Surface: "webhook", ChatID: chat, UserID: "webhook:" + h.ID,
		Group: true, AgentID: h.Agent, MessageID: id, Text: prompt, Time: now}
	sink, err := s.sinkFor(ctx)
	recorded := false // apart from the gateway's record, so not undone with it
	if err == nil {
		if ts, ok := sink.(txSink); ok {
			err = ts.DeliverWith(ctx, in, record)
		} else if err = s.opts.DB.Tx(ctx, record); err == nil {
			recorded = true
			err = sink.Deliver(ctx, in)
		}
	}
	if errors.Is(err, errRepeat) {
		return s.repeat(ctx, h, key)
	}
	if errors.Is(err, errReplay) {
		return errorBody(fail(http.StatusConflict, "replayed", "this request's signature was already used by an earlier delivery; sign each delivery when you send it"))
	}
	if s.opts.OnDelivery != nil {
		if err != nil {
			s.opts.OnDelivery("failed")
		} else {
			s.opts.OnDelivery("accepted")
		}
	}
	if err != nil {
		s.opts.Log.ErrorContext(ctx, "deliver a webhook", "hook", h.ID, "delivery_id", id, "error", err)
		// Recorded as failed, its key freed: the sender's retry is a new try.
		code, body := errorBody(fail(http.StatusServiceUnavailable, "unavailable", "parley could not take the delivery; try again"))
		_, _ = s.opts.DB.Write().ExecContext(context.WithoutCancel(ctx), failedQuery, id, h.ID, sessionKey, err.Error(), dbutil.Millis(s.opts.Now()),
			code, string(body))
		if recorded {
			s.releaseReplays(context.WithoutCancel(ctx), h.ID, replay)
		}
		return code, body
	}
	if wait == nil {
		return answer, []byte(answerBody) // recorded with the delivery
	}
	body := map[string]any{"delivery_id": id, "session_key": sessionKey}
	select {
	case reply := <-wait:
		body["status"], body["reply"] = "answered", reply
		return s.respond(ctx, id, http.StatusOK, mustJSON(body))
	case <-time.After(h.Timeout.Std()):
		body["status"] = "running"
		body["message"] = "the agent didn't answer within the hook's timeout; it goes on, and its reply goes to the notify targets"
		return s.respond(ctx, id, http.StatusAccepted, mustJSON(body))
	case <-ctx.Done():
		return http.StatusAccepted, mustJSON(body)
	}
}

// sinkFor waits (briefly) for Start: a request that arrives as parley
// starts waits for the gateway rather than failing.
func (s *Server) sinkFor(ctx context.Context) (adapters.Sink, error) {
	select {
	case <-s.started:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		return nil, errors.New("the gateway is not running")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sink, nil
}

// respond stores the first response to a delivery, for repeats.
func (s *Server) respond(ctx context.Context, id string, status int, body []byte) (int, []byte) {
	if _, err := s.opts.DB.Write().ExecContext(context.WithoutCancel(ctx), respondedQuery, id, status, string(body)); err != nil {
		s.opts.Log.WarnContext(ctx, "record a webhook response", "delivery_id", id, "error", err)
	}
	return status, body
}

// repeat answers a delivery key seen before with the first response.
func (s *Server) repeat(ctx context.Context, h config.Hook, key string) (int, []byte) {
	var id, status, response, sessionKey string
	var code int
	err := s.opts.DB.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, deliveryByKeyQuery, h.ID, key).Scan(&id, &status, &code, &response, &sessionKey)
	})
	if errors.Is(err, sql.ErrNoRows) || err != nil {
		return errorBody(fail(http.StatusServiceUnavailable, "unavailable", "could not read the earlier delivery; try again"))
	}
	switch {
	case code != 0:
		return code, []byte(response)
	case h.Mode != "sync": // what the first got, an async acceptance
		return http.StatusAccepted, mustJSON(map[string]any{"delivery_id": id, "session_key": sessionKey, "status": "accepted"})
	default: // the first is still being answered
		return http.StatusAccepted, mustJSON(map[string]any{"delivery_id": id, "session_key": sessionKey, "status": "running", "duplicate": true})
	}
}

// Send takes a delivery's reply from the outbox: it records it, answers a
// waiting sync request and sends it to the hook's notify targets. Each
// note is keyed by the reply (the outbox's key) and its target, so a
// retried Send queues none twice; a note that fails to queue fails Send,
// and the outbox retries it.
func (s *Server) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	hookID, _, _ := strings.Cut(out.ChatID, ":")
	res, err := s.opts.DB.Write().ExecContext(ctx, answeredQuery, "webhook:"+out.ChatID, "answered", out.Text, "", dbutil.Millis(s.opts.Now()))
	if err != nil {
		return adapters.Sent{}, fmt.Errorf("record the reply of webhook %s: %w", hookID, err)
	}
	if n, _ := res.RowsAffected(); n > 0 && s.opts.OnDelivery != nil {
		s.opts.OnDelivery("answered")
	}
	var errs []error
	if h, ok := s.hook(hookID); ok && s.opts.Notify != nil {
		for _, target := range h.Notify {
			if err := s.opts.Notify(ctx, target, out.Text, NoteKey(out, target)); err != nil {
				s.opts.Log.WarnContext(ctx, "notify a webhook's target; the reply is sent again", "hook", hookID, "target", target, "error", err)
				errs = append(errs, fmt.Errorf("notify %s of webhook %s: %w", target, hookID, err))
			}
		}
	}
	// A sync request is answered once the targets have it, or failed to.
	s.mu.Lock()
	wait := s.waiters[out.ChatID]
	s.mu.Unlock()
	if wait != nil {
		select {
		case wait <- out.Text:
		default:
		}
	}
	if len(errs) > 0 {
		return adapters.Sent{}, errors.Join(errs...)
	}
	return adapters.Sent{MessageID: out.IdempotencyKey}, nil
}

// NoteKey is the idempotency key of the note a delivery's reply makes for
// one target: the reply's outbox key (its delivery's message and chunk),
// or, for a reply without one, its delivery's chat id and text.
func NoteKey(out adapters.Outbound, target string) string {
	key := out.IdempotencyKey
	if key == "" {
		sum := sha256.Sum256([]byte(out.Text))
		key = out.ChatID + ":" + hex.EncodeToString(sum[:8])
	}
	return "webhook:" + key + ":" + target
}

// Delivery is one recorded webhook delivery.
type Delivery struct {
	ID, HookID, Key, Status string
	HTTPStatus              int
	SessionKey, Reply, Err  string
	ReceivedAt, CompletedAt time.Time
	Duration                time.Duration
}

// Deliveries lists a hook's latest deliveries, newest first.
func Deliveries(ctx context.Context, db *dbutil.DB, hookID string, limit int) ([]Delivery, error) {
	out, err := dbutil.ViewQuery(ctx, db, listDeliveriesQuery, func(r dbutil.Scanner) (Delivery, error) {
		var d Delivery
		var received, completed, dur int64
		err := r.Scan(&d.ID, &d.HookID, &d.Key, &d.Status, &d.HTTPStatus, &d.SessionKey, &d.Reply, &d.Err, &received, &completed, &dur)
		d.ReceivedAt, d.Duration = dbutil.Time(received), time.Duration(dur)*time.Millisecond
		if completed > 0 {
			d.CompletedAt = dbutil.Time(completed)
		}
		return d, err
	}, hookID, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of hook %s: %w", hookID, err)
	}
	return out, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// limitedWriter stops a template from writing an unbounded prompt.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, fmt.Errorf("the prompt is over %d KiB", maxPrompt>>10)
	}
	l.n -= len(p)
	return l.w.Write(p)
}
