// Package sessionhooks posts sessions' lifecycle events to integrators'
// URLs (session_hooks in the config): session.created, .reset, .archived,
// .deleted, .compacted and message.user. Each event is queued in the
// transaction that makes the change it tells of (a sessions lifecycle or
// append hook), so a crash loses none and invents none; a sender on every
// replica claims due events with a lease, POSTs them signed, and sends a
// session's events in order: one waits until those before it are
// delivered or given up. A message.user hook may instead be synchronous:
// posted before the message is stored, its answer's snapshot_id kept in
// the message's metadata.
package sessionhooks

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/signing"
)

// Delivery states.
const (
	StatusPending   = "pending"
	StatusDelivered = "delivered"
	StatusFailed    = "failed"
)

const (
	insertQuery = `INSERT INTO session_hook_events (id, session_id, event, url, body, status, next_attempt_at, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6, $6)`

	sessionKeyQuery = `SELECT agent_id, user_id, surface, surface_id, workspace_id FROM sessions WHERE id = $1`

	// The due events, each the first of its session not yet done for its
	// hook, claimed with a lease as the outbox claims replies: no other
	// sender, here or on another replica, takes one until the lease
	// lapses. Each hook has its own order: one that is down holds back
	// only its own events.
	claimQuery = `UPDATE session_hook_events SET attempts = attempts + 1, lease_until = $2, claim_instance = $3, updated_at = $1
	WHERE id IN (SELECT e.id FROM session_hook_events e WHERE e.status = 'pending' AND e.next_attempt_at <= $1 AND e.lease_until <= $1
		AND NOT EXISTS (SELECT 1 FROM session_hook_events p WHERE p.session_id = e.session_id AND p.url = e.url AND p.status = 'pending' AND p.id < e.id)
		ORDER BY e.id LIMIT 20%s)
	RETURNING id, session_id, event, url, body, attempts`
	claimLock = ` FOR UPDATE SKIP LOCKED`

	// Only the holder of the attempt records its outcome.
	recordQuery = `UPDATE session_hook_events SET status = $2, next_attempt_at = $3, lease_until = 0, last_status = $4,
	last_error = $5, updated_at = $6
	WHERE id = $1 AND attempts = $7 AND claim_instance = $8 AND status = 'pending'`

	releaseQuery = `UPDATE session_hook_events SET lease_until = 0 WHERE claim_instance = $1 AND status = 'pending' AND lease_until > 0`

	listQuery = `SELECT id, event, url, status, attempts, last_status, last_error, created_at, updated_at
	FROM session_hook_events WHERE session_id = $1 ORDER BY id`
)

// Options configure Hooks.
type Options struct {
	DB *dbutil.DB
	// Hooks are the configured hooks, read at each use (a reload changes
	// them).
	Hooks  func() []config.SessionHook
	Client *http.Client
	Log    *slog.Logger
	Now    func() time.Time
	// Lease is how long a claim holds an event; a POST ends within half of
	// it. Default 30s.
	Lease time.Duration
	// MaxAttempts is how many POSTs an event gets before it is given up.
	// Default 12 (about a day with Backoff's default).
	MaxAttempts int
	// Backoff is the wait after a failed attempt. Default: 2^attempt
	// seconds, at most an hour.
	Backoff func(attempt int) time.Duration
	// Poll is how often the sender looks for due events besides being
	// woken, while hooks are configured. Default 5s.
	Poll time.Duration
}

// Hooks queues and sends the session hooks' events.
type Hooks struct {
	opts     Options
	instance string
	wake     chan struct{}

	// posts holds, by message id, its synchronous POSTs (Before): each
	// hook's delivery id, kept for a try again of the same message, and
	// which failed, for Append to queue the event for those.
	postsMu sync.Mutex
	posts   map[sessions.MessageID]syncPosts
	// pruned is when posts last let go of its old messages: at most once
	// a postsFor/10, not at every POST, which would walk every message
	// of the last postsFor each time.
	pruned time.Time
}

// syncPosts are a message's synchronous POSTs: each hook's delivery id,
// by URL, those that failed, and when the last was made.
type syncPosts struct {
	ids    map[string]string
	failed map[string]bool
	at     time.Time
}

// postsFor is how long a message's synchronous POSTs are remembered for
// its append (which takes far less) or a try again of it: one that never
// comes (refused, say) leaves nothing behind past it.
const postsFor = 10 * time.Minute

// New returns Hooks over opts.
func New(opts Options) *Hooks {
	if opts.Client == nil {
		opts.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 12
	}
	if opts.Backoff == nil {
		opts.Backoff = func(n int) time.Duration { return min(time.Duration(1<<min(n, 12))*time.Second, time.Hour) }
	}
	if opts.Poll <= 0 {
		opts.Poll = 5 * time.Second
	}
	return &Hooks{opts: opts, instance: uuid.NewString(), wake: make(chan struct{}, 1)}
}

// Event is the JSON body of one POST.
type Event struct {
	ID          string    `json:"id"`
	Event       string    `json:"event"`
	At          time.Time `json:"at"`
	SessionID   string    `json:"session_id"`
	AgentID     string    `json:"agent_id,omitempty"`
	UserID      string    `json:"user_id,omitempty"`
	Surface     string    `json:"surface,omitempty"`
	SurfaceID   string    `json:"surface_id,omitempty"`
	WorkspaceID string    `json:"workspace_id,omitempty"`
	// OldSessionID is the session a reset archived.
	OldSessionID string                  `json:"old_session_id,omitempty"`
	Reason       string                  `json:"reason,omitempty"`
	Compaction   *sessions.CompactedInfo `json:"compaction,omitempty"`
	// Message is the user's message (message.user).
	Message *Message `json:"message,omitempty"`
}

// Message is a user message as message.user tells it.
type Message struct {
	ID        string          `json:"id"`
	Content   string          `json:"content"`
	CreatedAt time.Time       `json:"created_at,omitzero"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// StoreOptions hook h into the sessions store: each lifecycle event and
// user message is queued in the transaction of its change, and deleting
// a session deletes its queued messages.
func (h *Hooks) StoreOptions() []sessions.Option {
	return []sessions.Option{sessions.WithLifecycleHook(h.Lifecycle), sessions.WithAppendHook(h.Append),
		sessions.WithBeforeAppendHook(h.Before), sessions.WithDeleteHook(ForgetSessions)}
}

// Lifecycle queues l for every hook that wants it, in q's transaction
// (a sessions.LifecycleHook).
func (h *Hooks) Lifecycle(ctx context.Context, q dbutil.Querier, l sessions.Lifecycle) error {
	ev := Event{Event: string(l.Type), At: l.At.UTC(), SessionID: string(l.Session), OldSessionID: string(l.Old),
		Reason: l.Reason, Compaction: l.Compacted}
	return h.queue(ctx, q, ev, l.Key, nil)
}

// Append queues message.user for a user's message, in the transaction
// that stores it (a sessions.AppendHook), for every hook that takes it
// queued rather than synchronously.
func (h *Hooks) Append(ctx context.Context, q dbutil.Querier, m sessions.Message) error {
	if m.Role != sessions.RoleUser || m.Synthetic {
		return nil
	}
	ev := Event{Event: "message.user", At: m.CreatedAt.UTC(), SessionID: string(m.SessionID),
		Message: &Message{ID: string(m.ID), Content: m.Content, CreatedAt: m.CreatedAt.UTC(), Metadata: m.Metadata}}
	h.postsMu.Lock()
	p := h.posts[m.ID]
	h.postsMu.Unlock()
	return h.queue(ctx, q, ev, sessions.Key{}, func(hook config.SessionHook) (string, bool) {
		if hook.SyncTimeout <= 0 {
			return "", true
		}
		// A synchronous hook has had it, unless its POST failed: then it
		// is queued under that POST's delivery id (a time-ordered one,
		// from just before the append), so a receiver that did get the
		// late POST sees the same X-Parley-Delivery twice.
		return p.ids[hook.URL], p.failed[hook.URL]
	})
}

// queue queues ev for every hook that wants it and that take (nil: every
// one) takes, with the id take gives ("": a new one).
func (h *Hooks) queue(ctx context.Context, q dbutil.Querier, ev Event, key sessions.Key, take func(config.SessionHook) (string, bool)) error {
	hooks := h.opts.Hooks()
	if len(hooks) == 0 {
		return nil
	}
	if key.AgentID == "" {
		// Read in the transaction: the row is there until it commits.
		err := q.QueryRowContext(ctx, sessionKeyQuery, ev.SessionID).Scan(&key.AgentID, &key.UserID, &key.Surface, &key.SurfaceID, &key.WorkspaceID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	ev.AgentID, ev.UserID, ev.Surface, ev.SurfaceID, ev.WorkspaceID = key.AgentID, key.UserID, key.Surface, key.SurfaceID, key.WorkspaceID
	now := dbutil.Millis(h.opts.Now())
	queued := false
	for _, hook := range hooks {
		if !hook.Wants(ev.Event, key.AgentID) {
			continue
		}
		ev.ID = ""
		if take != nil {
			id, ok := take(hook)
			if !ok {
				continue
			}
			ev.ID = id
		}
		if ev.ID == "" {
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			ev.ID = id.String()
		}
		body, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, insertQuery, ev.ID, ev.SessionID, ev.Event, hook.URL, string(body), now); err != nil {
			return fmt.Errorf("queue %s for a session hook: %w", ev.Event, err)
		}
		queued = true
	}
	if queued {
		h.Wake()
	}
	return nil
}

// Wake makes the sender look for due events now.
func (h *Hooks) Wake() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Before posts message.user to each synchronous hook that wants it, before
// the message is stored (a sessions.BeforeAppendHook), and keeps a
// snapshot_id its answer gives in the message's metadata. A hook that
// fails or doesn't answer in its sync_timeout is logged, the message is
// stored as it is, and the event is queued for that hook in the append's
// transaction (Append), to be sent as the rest are.
func (h *Hooks) Before(ctx context.Context, id sessions.ID, m *sessions.Message) {
	hooks := h.opts.Hooks()
	for _, hook := range hooks {
		if hook.SyncTimeout <= 0 || !hook.Wants("message.user", "") {
			continue
		}
		var key sessions.Key
		if err := h.opts.DB.Read().QueryRowContext(ctx, sessionKeyQuery, string(id)).Scan(&key.AgentID, &key.UserID, &key.Surface,
			&key.SurfaceID, &key.WorkspaceID); err != nil || !hook.Wants("message.user", key.AgentID) {
			continue
		}
		did, err := h.deliveryID(m.ID, hook.URL)
		if err != nil {
			continue
		}
		ev := Event{ID: did, Event: "message.user", At: h.opts.Now().UTC(), SessionID: string(id), AgentID: key.AgentID,
			UserID: key.UserID, Surface: key.Surface, SurfaceID: key.SurfaceID, WorkspaceID: key.WorkspaceID,
			Message: &Message{ID: string(m.ID), Content: m.Content, Metadata: m.Metadata}}
		body, err := json.Marshal(ev)
		if err != nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, hook.SyncTimeout.Std())
		code, answer, err := h.post(pctx, hook, ev.ID, ev.Event, body)
		cancel()
		if err != nil {
			h.opts.Log.WarnContext(ctx, "a synchronous message.user hook failed; the message is stored without its snapshot, and the event queued for the hook",
				"session_id", id, "message_id", m.ID, "url", config.RedactURL(hook.URL), "status", code, "error", err)
			h.posted(m.ID, hook.URL, false)
			continue
		}
		// A try before this one may have failed (its append never
		// committed): the hook has the message now, so it isn't queued.
		h.posted(m.ID, hook.URL, true)
		var got struct {
			SnapshotID string `json:"snapshot_id"`
		}
		if json.Unmarshal(answer, &got) == nil && got.SnapshotID != "" {
			m.Metadata = withKey(m.Metadata, "snapshot_id", got.SnapshotID)
		}
	}
}

// deliveryID is the delivery id of message id's synchronous POST to the
// hook at url: the one an earlier try of the same message used, so a
// receiver sees a try again as the same delivery, else a new
// time-ordered one. It lets go of messages older than postsFor, looking
// for them once a postsFor/10.
func (h *Hooks) deliveryID(id sessions.MessageID, url string) (string, error) {
	now := h.opts.Now()
	h.postsMu.Lock()
	defer h.postsMu.Unlock()
	if h.posts == nil {
		h.posts = map[sessions.MessageID]syncPosts{}
	}
	if now.Sub(h.pruned) > postsFor/10 {
		for k, p := range h.posts {
			if now.Sub(p.at) > postsFor {
				delete(h.posts, k)
			}
		}
		h.pruned = now
	}
	p := h.posts[id]
	if d, ok := p.ids[url]; ok {
		return d, nil
	}
	d, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	if p.ids == nil {
		p.ids, p.failed = map[string]string{}, map[string]bool{}
	}
	p.ids[url], p.at = d.String(), now
	h.posts[id] = p
	return d.String(), nil
}

// posted notes how message id's synchronous POST to url went: a failed
// one is queued by the append; one that reached it (a try again, after a
// failure whose append never committed) is not.
func (h *Hooks) posted(id sessions.MessageID, url string, ok bool) {
	h.postsMu.Lock()
	defer h.postsMu.Unlock()
	if p, found := h.posts[id]; found {
		p.failed[url], p.at = !ok, h.opts.Now()
		h.posts[id] = p
	}
}

// withKey is the JSON object meta with key set to v.
func withKey(meta json.RawMessage, key, v string) json.RawMessage {
	obj := map[string]json.RawMessage{}
	_ = json.Unmarshal(meta, &obj)
	b, _ := json.Marshal(v)
	obj[key] = b
	out, _ := json.Marshal(obj)
	return out
}

// post POSTs one event, signed with the hook's secret, and returns the
// answer's status and (up to 64 KiB of) body.
func (h *Hooks) post(ctx context.Context, hook config.SessionHook, id, event string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	ts, sig := signing.Sign(hook.Secret.Reveal(), h.opts.Now(), body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "parley-session-hooks")
	req.Header.Set("X-Parley-Timestamp", ts)
	req.Header.Set("X-Parley-Signature", sig)
	req.Header.Set("X-Parley-Delivery", id)
	req.Header.Set("X-Parley-Event", event)
	res, err := h.opts.Client.Do(req)
	if err != nil {
		// The error names the URL: without a password or query values it
		// may hold, as everything else that prints it.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = config.RedactURL(ue.URL)
		}
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, answer, fmt.Errorf("the receiver answered %s", res.Status)
	}
	return res.StatusCode, answer, nil
}

// forgetMessagesQuery drops the message.user events of deleted sessions:
// each holds a person's message, which a deletion takes with every other
// copy. The sessions' other events (session.deleted among them) stay to
// be sent; they hold no text of the conversation.
const forgetMessagesQuery = `DELETE FROM session_hook_events WHERE event = 'message.user' AND session_id IN (%s)`

// ForgetSessions is a sessions.DeleteHook: deleting sessions deletes their
// message.user events, sent or not, in the same transaction.
func ForgetSessions(ctx context.Context, q dbutil.Querier, in string, args []any) error {
	if _, err := q.ExecContext(ctx, fmt.Sprintf(forgetMessagesQuery, in), args...); err != nil {
		return fmt.Errorf("forget deleted sessions' message.user events: %w", err)
	}
	return nil
}
