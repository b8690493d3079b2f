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
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/sessionhooks"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/signing"
	"github.com/parleyd/parley/telemetry"
)

const (
	// A reply is queued once, keyed by its message: in the transaction
	// that stores it (ReplyCallbackHook), holding it back until its turn
	// ends; the turn's end then fills in its outcome and makes it due at
	// once (queueCallbackQuery).
	holdCallbackQuery = `INSERT INTO api_callbacks
	(id, session_id, message_id, url, body, status, attempts, next_attempt_at, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $7, $7)
	ON CONFLICT (message_id) DO NOTHING`

	// Until its first attempt, a queued reply takes its turn's outcome;
	// one not queued yet (no hook, or a reply the hook can't tell, such
	// as a run stopped in a tool call) is queued now.
	queueCallbackQuery = `INSERT INTO api_callbacks
	(id, session_id, message_id, url, body, status, attempts, next_attempt_at, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6, $6)
	ON CONFLICT (message_id) DO UPDATE SET body = excluded.body, next_attempt_at = excluded.next_attempt_at,
	updated_at = excluded.updated_at
	WHERE api_callbacks.status = 'pending' AND api_callbacks.attempts = 0`

	sessionCallbackTargetQuery = `SELECT agent_id, metadata FROM sessions WHERE id = $1`

	// The due callbacks, claimed in one statement, as the outbox claims
	// its replies: the claim counts an attempt and leases the row to this
	// sender (lease_until, apart from next_attempt_at, the backoff), so no
	// other sender, here or on another replica, takes it until the lease
	// lapses. On PostgreSQL the pick locks its rows and skips those another
	// claim holds (claimCallbacksLock); a row changed meanwhile is checked
	// again as it now stands.
	claimCallbacksQuery = `UPDATE api_callbacks SET attempts = attempts + 1, lease_until = $2, claim_owner = $3,
		claim_instance = $4, updated_at = $1
	WHERE id IN (SELECT id FROM api_callbacks WHERE status = 'pending' AND next_attempt_at <= $1 AND lease_until <= $1
		ORDER BY next_attempt_at, id LIMIT %d%s)
	RETURNING id, url, body, attempts`
	claimCallbacksLock = ` FOR UPDATE SKIP LOCKED`

	// A claim still this sender's (no other claim counted an attempt since)
	// is extended before a POST that could outlast what is left of it.
	renewCallbackQuery = `UPDATE api_callbacks SET lease_until = $4
	WHERE id = $1 AND attempts = $2 AND claim_instance = $3 AND status = 'pending'`

	// Only the holder of the attempt records its outcome: a sender whose
	// lease lapsed, and whose row another sender claimed again since, does
	// not overwrite it.
	updateCallbackQuery = `UPDATE api_callbacks SET status = $2, next_attempt_at = $4, updated_at = $5, lease_until = 0
	WHERE id = $1 AND attempts = $3 AND claim_instance = $6 AND status = 'pending'`

	// A stopping sender gives back what it claimed and did not POST, so
	// another replica takes it at once rather than when the lease lapses.
	releaseCallbacksQuery = `UPDATE api_callbacks SET lease_until = 0
	WHERE claim_instance = $1 AND status = 'pending' AND lease_until > 0`

	insertAttemptQuery = `INSERT INTO api_callback_attempts (callback_id, attempt, status_code, error, duration_ms, at)
	VALUES ($1, $2, $3, $4, $5, $6)`

	sessionCallbacksQuery = `SELECT id, message_id, url, status, attempts, next_attempt_at, created_at, updated_at
	FROM api_callbacks WHERE session_id = $1 ORDER BY created_at, id`

	sessionAttemptsQuery = `SELECT a.callback_id, a.attempt, a.status_code, a.error, a.duration_ms, a.at
	FROM api_callback_attempts a JOIN api_callbacks c ON c.id = a.callback_id
	WHERE c.session_id = $1 ORDER BY a.callback_id, a.attempt`
)

// DefaultCallbackHold is how long a reply queued as it is stored waits for
// its turn to end before it is sent anyway: only a crash (or a lost event)
// between the two makes it wait that long.
const DefaultCallbackHold = 30 * time.Second

// ReplyCallbackHook queues a reply's callback in the transaction that
// stores the reply (sessions.WithAppendHook), when its session has a
// webhook_url: a reply the run wrote gets its callback even if the process
// dies right after, or the turn's end is never seen. The callback is held
// back for hold (DefaultCallbackHold when 0), for the turn's end to fill
// in its outcome (aborted, error) and release it at once.
func ReplyCallbackHook(hold time.Duration) sessions.AppendHook {
	if hold <= 0 {
		hold = DefaultCallbackHold
	}
	return func(ctx context.Context, q dbutil.Querier, m sessions.Message) error {
		if !agent.IsReply(m) {
			return nil
		}
		var agentID, meta string
		if err := q.QueryRowContext(ctx, sessionCallbackTargetQuery, string(m.SessionID)).Scan(&agentID, &meta); err != nil {
			return fmt.Errorf("read the reply callback target of %s: %w", m.SessionID, err)
		}
		target := WebhookURL(json.RawMessage(meta))
		if target == "" {
			return nil
		}
		body, err := replyPayload(m.SessionID, agentID, m, agent.TurnFinished{})
		if err != nil {
			return err
		}
		at := dbutil.Millis(m.CreatedAt)
		id := uuid.Must(uuid.NewV7()).String()
		if _, err := q.ExecContext(ctx, holdCallbackQuery, id, string(m.SessionID), string(m.ID),
			target, string(body), at+hold.Milliseconds(), at); err != nil {
			return fmt.Errorf("queue the reply callback of %s: %w", m.ID, err)
		}
		// Its POST goes under the turn's span, as traceparent.
		telemetry.Remember(ctx, id)
		return nil
	}
}

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
	// Client posts the deliveries; nil means a client with a 10 s timeout
	// that reaches only the addresses Allow lets it, and follows no
	// redirect.
	Client *http.Client
	// Allow is http.callback_allow: IP addresses, CIDR networks and host
	// names callbacks may reach although they are loopback, link-local,
	// private or reserved.
	Allow []string
	// MaxAttempts before a delivery is marked failed; 0 means 8.
	MaxAttempts int
	// Backoff is the wait after the nth failed attempt; nil means 2^n
	// seconds, capped at 10 minutes.
	Backoff func(attempt int) time.Duration
	// Poll is how often due retries are looked for; 0 means 1 s.
	Poll time.Duration
	// Lease is how long a claimed callback is kept from other senders;
	// each POST starts with at least half of it left and ends within
	// half of it. 0 means 1 minute.
	Lease time.Duration
	// Owner names this replica in the claims it makes (claim_owner); ""
	// means the host name.
	Owner string
	Now   func() time.Time
	Log   *slog.Logger
}

// Callbacks posts every finished assistant reply of a session that has a
// webhook_url to that URL, once. Replies are queued in api_callbacks,
// keyed by the reply's message, so one that fails (or that the process
// stops before sending) is retried with backoff; each attempt is kept in
// api_callback_attempts.
//
// A reply is queued durably with the reply itself: ReplyCallbackHook runs
// in the transaction that stores it, so no crash, lost event or database
// error between the two can leave a stored reply without its callback.
// The row waits (DefaultCallbackHold) for its turn's end, whose
// turn.finished event names the reply, adds the turn's outcome and makes
// it due at once; without the hook, that event queues the reply itself
// (retrying while the database fails). Senders claim due rows with a
// lease (FOR UPDATE SKIP LOCKED on PostgreSQL), and POST one only while
// their lease on it outlasts the POST, so of several senders (replicas on
// one database) one POSTs each callback; one whose sender died is taken
// over when its lease lapses.
type Callbacks struct {
	opts   CallbackOptions
	policy atomic.Pointer[callbackPolicy]
	sub    *events.Subscription
	kick   chan struct{}
	// instance names this sender in its claims (claim_instance).
	instance string
}

// NewCallbacks subscribes to the bus at once, so no reply finished before
// Run starts is missed.
func NewCallbacks(opts CallbackOptions) *Callbacks {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	policy, err := ParseCallbackAllow(opts.Allow)
	if err != nil {
		// The config check refuses it first; allowing less is the safe side.
		opts.Log.Error("http.callback_allow ignored", "error", err)
		policy, _ = ParseCallbackAllow(nil)
	}
	c := &Callbacks{sub: opts.Bus.Subscribe(agent.EventTurnFinished), kick: make(chan struct{}, 1), instance: uuid.NewString()}
	c.policy.Store(&policy)
	if opts.Client == nil {
		opts.Client = policyClient(func() callbackPolicy { return *c.policy.Load() }, 10*time.Second)
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
	if opts.Lease <= 0 {
		opts.Lease = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Owner == "" {
		opts.Owner, _ = os.Hostname()
	}
	c.opts = opts
	return c
}

// SetAllow puts entries (http.callback_allow) in place of the addresses
// callbacks may reach, as a reload does; connections kept from before are
// closed, so the next callback connects under the new list.
func (c *Callbacks) SetAllow(entries []string) error {
	policy, err := ParseCallbackAllow(entries)
	if err != nil {
		return fmt.Errorf("http.callback_allow: %w", err)
	}
	c.policy.Store(&policy)
	c.opts.Client.CloseIdleConnections()
	return nil
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
			c.enqueueRetrying(ctx, e)
			c.wake()
		}
	}()
	defer func() { <-queued }()
	defer c.release(ctx)
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
	// Files are the files the reply carries (send_file).
	Files []FileData `json:"files,omitempty"`
	At    time.Time  `json:"at"`
}

// enqueueRetrying is enqueue, tried again with backoff while it fails,
// until ctx ends: a database error does not lose the reply.
func (c *Callbacks) enqueueRetrying(ctx context.Context, e events.Event) {
	wait := c.opts.Poll
	for {
		err := c.enqueue(ctx, e)
		if err == nil || ctx.Err() != nil {
			return
		}
		c.opts.Log.WarnContext(ctx, "reply callback not queued; trying again", "session_id", e.SessionID, "retry_in", wait, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// enqueue queues the reply a turn.finished event names, with the turn's
// outcome, if its session has a webhook_url, and makes it due now.
func (c *Callbacks) enqueue(ctx context.Context, e events.Event) error {
	fin, _ := e.Data.(agent.TurnFinished)
	if fin.Reply == nil {
		return nil
	}
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
	body, err := replyPayload(sess.ID, sess.Key.AgentID, *fin.Reply, fin)
	if err != nil {
		return err
	}
	_, err = c.opts.DB.Write().ExecContext(ctx, queueCallbackQuery, uuid.Must(uuid.NewV7()).String(), string(sess.ID),
		string(fin.Reply.ID), target, string(body), dbutil.Millis(c.opts.Now()))
	if err != nil {
		return fmt.Errorf("queue reply callback of %s: %w", sess.ID, err)
	}
	return nil
}

// replyPayload is the body POSTed for reply m, with its turn's outcome.
func replyPayload(sid sessions.ID, agentID string, m sessions.Message, fin agent.TurnFinished) ([]byte, error) {
	body, err := json.Marshal(CallbackPayload{Type: "reply", SessionID: sid, MessageID: string(m.ID), AgentID: agentID,
		Content: m.Content, Model: m.Model, Aborted: fin.Aborted, Error: fin.Error, Files: replyFiles(string(sid), m), At: m.CreatedAt})
	if err != nil {
		return nil, fmt.Errorf("encode the reply callback of %s: %w", m.ID, err)
	}
	return body, nil
}

type dueCallback struct {
	id, url, body string
	// attempt is this claim's attempt number.
	attempt int
	// leaseUntil is when this sender's claim lapses.
	leaseUntil time.Time
}

// claimBatch is how many due callbacks one claim takes.
const claimBatch = 50

var claimCallbacksSQL = map[bool]string{
	false: fmt.Sprintf(claimCallbacksQuery, claimBatch, ""),
	true:  fmt.Sprintf(claimCallbacksQuery, claimBatch, claimCallbacksLock),
}

// claim leases the due callbacks to this sender.
func (c *Callbacks) claim(ctx context.Context) ([]dueCallback, error) {
	now := c.opts.Now()
	until := now.Add(c.opts.Lease)
	var due []dueCallback
	err := c.opts.DB.Tx(ctx, func(q dbutil.Querier) (err error) {
		due, err = dbutil.Query(ctx, q, claimCallbacksSQL[c.opts.DB.Dialect == dbutil.Postgres], func(r dbutil.Scanner) (dueCallback, error) {
			d := dueCallback{leaseUntil: until}
			return d, r.Scan(&d.id, &d.url, &d.body, &d.attempt)
		}, dbutil.Millis(now), dbutil.Millis(until), c.opts.Owner, c.instance)
		if err != nil {
			return fmt.Errorf("claim due reply callbacks: %w", err)
		}
		return nil
	})
	return due, err
}

func (c *Callbacks) deliverDue(ctx context.Context) error {
	for {
		due, err := c.claim(ctx)
		if err != nil {
			return err
		}
		for _, d := range due {
			if ctx.Err() != nil {
				return nil // Run releases the rest as it returns
			}
			if err := c.deliver(ctx, d); err != nil {
				return err
			}
		}
		if len(due) < claimBatch {
			return nil
		}
	}
}

// deliver makes one attempt and records it, outside any transaction for
// the POST itself. The POST starts with at least half the lease left
// (the claim is renewed first if need be) and ends within half of it, so
// no other sender can claim the callback while it is under way.
func (c *Callbacks) deliver(ctx context.Context, d dueCallback) error {
	if d.leaseUntil.Sub(c.opts.Now()) < c.opts.Lease/2 {
		held, err := c.renew(ctx, &d)
		if err != nil || !held {
			return err // not held: its lease lapsed and another sender has it
		}
		if d.leaseUntil.Sub(c.opts.Now()) < c.opts.Lease/2 {
			return nil // the renewal took half the lease: let it lapse and be claimed again
		}
	}
	start := c.opts.Now()
	pctx, cancel := context.WithTimeout(ctx, c.opts.Lease/2)
	code, postErr := c.post(pctx, d)
	cancel()
	if postErr != nil && ctx.Err() != nil {
		return nil // cut off by shutdown: Run releases the claim, and another sender makes the attempt
	}
	end := c.opts.Now()
	status, next := CallbackDelivered, end
	if postErr != nil {
		status, next = CallbackPending, end.Add(c.opts.Backoff(d.attempt))
		if d.attempt >= c.opts.MaxAttempts {
			status = CallbackFailed
		}
		c.opts.Log.WarnContext(ctx, "reply callback attempt failed", "callback_id", d.id, "attempt", d.attempt, "error", postErr)
	}
	errText := ""
	if postErr != nil {
		errText = postErr.Error()
	}
	// A POST that got through is recorded even as the process stops, or
	// another sender would POST it again.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return c.opts.DB.Tx(rctx, func(q dbutil.Querier) error {
		if _, err := q.ExecContext(rctx, insertAttemptQuery, d.id, d.attempt, code, errText,
			end.Sub(start).Milliseconds(), dbutil.Millis(end)); err != nil {
			return fmt.Errorf("record reply callback attempt %s: %w", d.id, err)
		}
		if _, err := q.ExecContext(rctx, updateCallbackQuery, d.id, status, d.attempt, dbutil.Millis(next), dbutil.Millis(end), c.instance); err != nil {
			return fmt.Errorf("update reply callback %s: %w", d.id, err)
		}
		return nil
	})
}

// renew extends this sender's claim on d to a full lease from now; held is
// false when the claim is no longer this sender's.
func (c *Callbacks) renew(ctx context.Context, d *dueCallback) (held bool, err error) {
	until := c.opts.Now().Add(c.opts.Lease)
	res, err := c.opts.DB.Write().ExecContext(ctx, renewCallbackQuery, d.id, d.attempt, c.instance, dbutil.Millis(until))
	if err != nil {
		return false, fmt.Errorf("renew the claim on reply callback %s: %w", d.id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, err
	}
	d.leaseUntil = until
	return true, nil
}

// release gives back the callbacks this sender claimed and did not POST,
// as Run returns.
func (c *Callbacks) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.opts.DB.Write().ExecContext(ctx, releaseCallbacksQuery, c.instance); err != nil {
		c.opts.Log.WarnContext(ctx, "release claimed reply callbacks; they are sent once their lease lapses", "error", err)
	}
}

func (c *Callbacks) post(ctx context.Context, d dueCallback) (code int, err error) {
	ctx, span := telemetry.Start(telemetry.Recall(ctx, d.id), telemetry.SpanCallback, telemetry.KindClient)
	defer func() {
		span.Int("http.response.status_code", int64(code))
		span.Fail(err)
		span.End()
	}()
	span.Int("parley.callback.attempt", int64(d.attempt))
	body := []byte(d.body)
	if err := c.policy.Load().checkURL(d.url); err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	telemetry.Inject(ctx, req.Header)
	ts, sig := signing.Sign(c.opts.Secret, c.opts.Now(), body)
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
	if res.StatusCode >= 300 && res.StatusCode <= 399 {
		return res.StatusCode, fmt.Errorf("the receiver answered %s; redirects are not followed: set webhook_url to the final URL", res.Status)
	}
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

// CheckURL says what is wrong with a reply callback URL: its form, or a
// literal address callbacks may not reach.
func (c *Callbacks) CheckURL(raw string) error { return c.policy.Load().checkURL(raw) }

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

// HookEventsResponse is GET /v1/sessions/{id}/hook_events.
type HookEventsResponse struct {
	Events []sessionhooks.Delivery `json:"events"`
}

// listHookEvents answers GET /v1/sessions/{id}/hook_events: the session's
// lifecycle events queued for the session hooks, and how sending each
// went. A deleted session's are there too (its session.deleted among
// them), so the session itself is not looked up.
func (s *server) listHookEvents(w http.ResponseWriter, r *http.Request) error {
	if s.opts.SessionHooks == nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "session hooks are not available on this server")
	}
	id := r.PathValue("id")
	if _, err := uuid.Parse(id); err != nil {
		return badRequest("session id " + quote(id) + " is not a session id (a UUID)")
	}
	list, err := s.opts.SessionHooks.List(r.Context(), id)
	if err != nil {
		return err
	}
	if list == nil {
		list = []sessionhooks.Delivery{}
	}
	writeJSON(w, http.StatusOK, HookEventsResponse{Events: list})
	return nil
}
