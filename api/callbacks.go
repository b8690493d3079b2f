package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/webhooks"
)

const (
	// A reply is queued once: a turn.finished seen twice adds nothing.
	insertCallbackQuery = `INSERT INTO api_callbacks
	(id, session_id, message_id, url, body, status, attempts, next_attempt_at, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6, $6)
	ON CONFLICT (message_id) DO NOTHING`

	dueCallbacksQuery = `SELECT id, url, body, attempts FROM api_callbacks
	WHERE status = 'pending' AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT $2`

	updateCallbackQuery = `UPDATE api_callbacks SET status = $2, attempts = $3, next_attempt_at = $4, updated_at = $5
	WHERE id = $1`

	insertAttemptQuery = `INSERT INTO api_callback_attempts (callback_id, attempt, status_code, error, duration_ms, at)
	VALUES ($1, $2, $3, $4, $5, $6)`

	sessionCallbacksQuery = `SELECT id, message_id, url, status, attempts, next_attempt_at, created_at, updated_at
	FROM api_callbacks WHERE session_id = $1 ORDER BY created_at, id`

	sessionAttemptsQuery = `SELECT a.callback_id, a.attempt, a.status_code, a.error, a.duration_ms, a.at
	FROM api_callback_attempts a JOIN api_callbacks c ON c.id = a.callback_id
	WHERE c.session_id = $1 ORDER BY a.callback_id, a.attempt`
)

// Delivery states of a reply callback.
const (
	CallbackPending   = "pending"
	CallbackDelivered = "delivered"
	CallbackFailed    = "failed"
)

// MetadataWebhookURL is the session metadata key of a session's reply
// callback URL.
const MetadataWebhookURL = "webhook_url"

// CallbackOptions configures Callbacks.
type CallbackOptions struct {
	DB    *dbutil.DB
	Store Store
	// Bus carries the agent's turn.finished events.
	Bus *events.Bus
	// Secret signs each delivery like incoming webhooks
	// (X-Parley-Timestamp, X-Parley-Signature).
	Secret string
	// Client posts the deliveries; nil means a client with a 10 s timeout.
	Client *http.Client
	// MaxAttempts before a delivery is marked failed; 0 means 8.
	MaxAttempts int
	// Backoff is the wait after the nth failed attempt; nil means 2^n
	// seconds, capped at 10 minutes.
	Backoff func(attempt int) time.Duration
	// Poll is how often due retries are looked for; 0 means 1 s.
	Poll time.Duration
	Now  func() time.Time
	Log  *slog.Logger
}

// Callbacks posts every finished assistant reply of a session that has a
// webhook_url to that URL. Replies are queued in api_callbacks, so one
// that fails (or that the process stops before sending) is retried with
// backoff; each attempt is kept in api_callback_attempts.
type Callbacks struct {
	opts CallbackOptions
	sub  *events.Subscription
	kick chan struct{}
}

// NewCallbacks subscribes to the bus at once, so no reply finished before
// Run starts is missed.
func NewCallbacks(opts CallbackOptions) *Callbacks {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.Backoff == nil {
		opts.Backoff = func(n int) time.Duration { return min(time.Second<<min(n, 20), 10*time.Minute) }
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Callbacks{opts: opts, sub: opts.Bus.Subscribe(agent.EventTurnFinished), kick: make(chan struct{}, 1)}
}

// Run queues finished replies and delivers them until ctx ends.
func (c *Callbacks) Run(ctx context.Context) error {
	defer c.sub.Close()
	queued := make(chan struct{})
	go func() {
		defer close(queued)
		for {
			e, err := c.sub.Next(ctx)
			if err != nil {
				return
			}
			if err := c.enqueue(ctx, e); err != nil && ctx.Err() == nil {
				c.opts.Log.ErrorContext(ctx, "reply callback not queued", "session_id", e.SessionID, "error", err)
				continue
			}
			c.wake()
		}
	}()
	defer func() { <-queued }()
	tick := time.NewTicker(c.opts.Poll)
	defer tick.Stop()
	for {
		if err := c.deliverDue(ctx); err != nil && ctx.Err() == nil {
			c.opts.Log.ErrorContext(ctx, "reply callbacks not delivered", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-c.kick:
		}
	}
}

func (c *Callbacks) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// CallbackPayload is the JSON body POSTed to a session's webhook_url.
type CallbackPayload struct {
	Type      string      `json:"type"` // "reply"
	SessionID sessions.ID `json:"session_id"`
	MessageID string      `json:"message_id"`
	AgentID   string      `json:"agent_id"`
	Content   string      `json:"content"`
	Model     string      `json:"model,omitempty"`
	Aborted   bool        `json:"aborted"`
	Error     string      `json:"error,omitempty"`
	At        time.Time   `json:"at"`
}

// enqueue queues the reply a turn.finished event ended, if its session
// has a webhook_url.
func (c *Callbacks) enqueue(ctx context.Context, e events.Event) error {
	fin, _ := e.Data.(agent.TurnFinished)
	sess, err := c.opts.Store.Session(ctx, sessions.ID(e.SessionID))
	if errors.Is(err, sessions.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	target := WebhookURL(sess.Metadata)
	if target == "" {
		return nil
	}
	msgs, err := c.opts.Store.Messages(ctx, sess.ID, sessions.MessagesOptions{})
	if err != nil {
		return err
	}
	var reply *sessions.Message
	for i := len(msgs) - 1; i >= 0 && reply == nil; i-- {
		switch m := msgs[i]; {
		case m.Role == sessions.RoleUser && !m.Synthetic:
			return nil // the turn wrote no reply after its user message
		case m.Role == sessions.RoleAssistant && strings.TrimSpace(m.Content) != "":
			reply = &msgs[i]
		}
	}
	if reply == nil {
		return nil
	}
	body, err := json.Marshal(CallbackPayload{Type: "reply", SessionID: sess.ID, MessageID: string(reply.ID), AgentID: sess.Key.AgentID,
		Content: reply.Content, Model: reply.Model, Aborted: fin.Aborted, Error: fin.Error, At: reply.CreatedAt})
	if err != nil {
		return err
	}
	now := dbutil.Millis(c.opts.Now())
	_, err = c.opts.DB.Write().ExecContext(ctx, insertCallbackQuery, uuid.Must(uuid.NewV7()).String(), string(sess.ID),
		string(reply.ID), target, string(body), now)
	if err != nil {
		return fmt.Errorf("queue reply callback of %s: %w", sess.ID, err)
	}
	return nil
}

type dueCallback struct {
	id, url, body string
	attempts      int
}

func (c *Callbacks) deliverDue(ctx context.Context) error {
	rows, err := c.opts.DB.Read().QueryContext(ctx, dueCallbacksQuery, dbutil.Millis(c.opts.Now()), 50)
	if err != nil {
		return fmt.Errorf("load due reply callbacks: %w", err)
	}
	var due []dueCallback
	for rows.Next() {
		var d dueCallback
		if err := rows.Scan(&d.id, &d.url, &d.body, &d.attempts); err != nil {
			rows.Close()
			return err
		}
		due = append(due, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, d := range due {
		if err := c.deliver(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// deliver makes one attempt and records it, outside any transaction for
// the POST itself.
func (c *Callbacks) deliver(ctx context.Context, d dueCallback) error {
	start := c.opts.Now()
	code, postErr := c.post(ctx, d)
	if ctx.Err() != nil {
		return nil // shutting down: the attempt is made again next time
	}
	end := c.opts.Now()
	attempt := d.attempts + 1
	status, next := CallbackDelivered, end
	if postErr != nil {
		status, next = CallbackPending, end.Add(c.opts.Backoff(attempt))
		if attempt >= c.opts.MaxAttempts {
			status = CallbackFailed
		}
		c.opts.Log.WarnContext(ctx, "reply callback attempt failed", "callback_id", d.id, "attempt", attempt, "error", postErr)
	}
	errText := ""
	if postErr != nil {
		errText = postErr.Error()
	}
	return c.opts.DB.Tx(ctx, func(q dbutil.Querier) error {
		if _, err := q.ExecContext(ctx, insertAttemptQuery, d.id, attempt, code, errText,
			end.Sub(start).Milliseconds(), dbutil.Millis(end)); err != nil {
			return fmt.Errorf("record reply callback attempt %s: %w", d.id, err)
		}
		if _, err := q.ExecContext(ctx, updateCallbackQuery, d.id, status, attempt, dbutil.Millis(next), dbutil.Millis(end)); err != nil {
			return fmt.Errorf("update reply callback %s: %w", d.id, err)
		}
		return nil
	})
}

func (c *Callbacks) post(ctx context.Context, d dueCallback) (int, error) {
	body := []byte(d.body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts, sig := webhooks.Sign(c.opts.Secret, c.opts.Now(), body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "parley-callbacks")
	req.Header.Set("X-Parley-Timestamp", ts)
	req.Header.Set("X-Parley-Signature", sig)
	req.Header.Set("X-Parley-Delivery", d.id)
	res, err := c.opts.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, fmt.Errorf("the receiver answered %s", res.Status)
	}
	return res.StatusCode, nil
}

// Callback is one queued reply delivery and its attempts.
type Callback struct {
	ID            string            `json:"id"`
	MessageID     string            `json:"message_id"`
	URL           string            `json:"url"`
	Status        string            `json:"status"`
	Attempts      int               `json:"attempts"`
	NextAttemptAt time.Time         `json:"next_attempt_at,omitzero"`
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
	History       []CallbackAttempt `json:"history"`
}

// CallbackAttempt is one POST of a delivery.
type CallbackAttempt struct {
	Attempt    int       `json:"attempt"`
	StatusCode int       `json:"status_code,omitempty"`
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	At         time.Time `json:"at"`
}

// List returns a session's deliveries, oldest first, with their attempts.
func (c *Callbacks) List(ctx context.Context, id sessions.ID) ([]Callback, error) {
	rows, err := c.opts.DB.Read().QueryContext(ctx, sessionCallbacksQuery, string(id))
	if err != nil {
		return nil, fmt.Errorf("list reply callbacks of %s: %w", id, err)
	}
	out := []Callback{}
	index := map[string]int{}
	for rows.Next() {
		var cb Callback
		var next, created, updated int64
		if err := rows.Scan(&cb.ID, &cb.MessageID, &cb.URL, &cb.Status, &cb.Attempts, &next, &created, &updated); err != nil {
			rows.Close()
			return nil, err
		}
		if cb.Status == CallbackPending {
			cb.NextAttemptAt = dbutil.Time(next)
		}
		cb.CreatedAt, cb.UpdatedAt, cb.History = dbutil.Time(created), dbutil.Time(updated), []CallbackAttempt{}
		index[cb.ID] = len(out)
		out = append(out, cb)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = c.opts.DB.Read().QueryContext(ctx, sessionAttemptsQuery, string(id))
	if err != nil {
		return nil, fmt.Errorf("list reply callback attempts of %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var cbID string
		var a CallbackAttempt
		var at int64
		if err := rows.Scan(&cbID, &a.Attempt, &a.StatusCode, &a.Error, &a.DurationMS, &at); err != nil {
			return nil, err
		}
		a.At = dbutil.Time(at)
		if i, ok := index[cbID]; ok {
			out[i].History = append(out[i].History, a)
		}
	}
	return out, rows.Err()
}

// WebhookURL is the reply callback URL in a session's metadata, or "".
func WebhookURL(meta json.RawMessage) string {
	var m struct {
		URL string `json:"webhook_url"`
	}
	if len(meta) == 0 || json.Unmarshal(meta, &m) != nil {
		return ""
	}
	return m.URL
}

// checkWebhookURL says what is wrong with a reply callback URL.
func checkWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return badRequest("webhook_url must be an absolute http or https URL")
	}
	if u.User != nil {
		return badRequest("webhook_url must not carry credentials; replies are signed with the callback secret")
	}
	return nil
}

// CallbacksResponse answers GET /v1/sessions/{id}/callbacks.
type CallbacksResponse struct {
	Callbacks []Callback `json:"callbacks"`
}

func (s *server) listCallbacks(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Callbacks == nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "reply callbacks are not available on this server")
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	list, err := s.opts.Callbacks.List(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, CallbacksResponse{Callbacks: list})
	return nil
}
