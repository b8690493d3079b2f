package clienttools

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

const (
	sessionCountQuery = `SELECT count(*) FROM sessions WHERE id = $1`

	upsertToolsQuery = `INSERT INTO session_client_tools (session_id, tools, updated_at) VALUES ($1, $2, $3)
	ON CONFLICT (session_id) DO UPDATE SET tools = excluded.tools, updated_at = excluded.updated_at`

	deleteToolsQuery = `DELETE FROM session_client_tools WHERE session_id = $1`

	toolsQuery = `SELECT tools FROM session_client_tools WHERE session_id = $1`
)

// DefaultTimeout is how long a run waits for a client's result when the
// config sets no sessions.client_tools.timeout: the config's default.
const DefaultTimeout = config.DefaultClientToolTimeout

// Options configure a Hub.
type Options struct {
	// Timeout is how long a run waits for a result; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// After is the timer (nil means time.After); tests pass their own.
	After func(time.Duration) <-chan time.Time
	// Now is the clock (nil means time.Now).
	Now func() time.Time
}

// Hub keeps the sessions' declared tools in the database and, in memory,
// the calls waiting for their results. It is safe for concurrent use.
type Hub struct {
	db      *dbutil.DB
	opts    Options
	timeout atomic.Int64 // nanoseconds

	mu      sync.Mutex
	pending map[sessions.ID][]*Pending // in the order asked
}

// New returns a hub on db.
func New(db *dbutil.DB, opts Options) *Hub {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Hub{db: db, opts: opts, pending: map[sessions.ID][]*Pending{}}
	h.SetTimeout(opts.Timeout)
	return h
}

// Timeout is how long a call waits for its result.
func (h *Hub) Timeout() time.Duration { return time.Duration(h.timeout.Load()) }

// SetTimeout changes the timeout of the calls asked from now on (a config
// reload); 0 means DefaultTimeout.
func (h *Hub) SetTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultTimeout
	}
	h.timeout.Store(int64(d))
}

// Declare replaces the tools the session's client declared (none removes
// them). Check specs with Validate first.
func (h *Hub) Declare(ctx context.Context, id sessions.ID, specs []Spec) error {
	b, err := json.Marshal(specs)
	if err != nil {
		return err
	}
	err = h.db.Tx(ctx, func(q dbutil.Querier) error {
		var n int
		if err := q.QueryRowContext(ctx, sessionCountQuery, string(id)).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: %s", ErrNoSession, id)
		}
		if len(specs) == 0 {
			_, err := q.ExecContext(ctx, deleteToolsQuery, string(id))
			return err
		}
		_, err := q.ExecContext(ctx, upsertToolsQuery, string(id), string(b), dbutil.Millis(h.opts.Now()))
		return err
	})
	if err != nil && !errors.Is(err, ErrNoSession) {
		return fmt.Errorf("declare the client tools of session %s: %w", id, err)
	}
	return err
}

// Declared is the tools the session's client declared, in their order.
func (h *Hub) Declared(ctx context.Context, id sessions.ID) ([]Spec, error) {
	var raw string
	err := h.db.Read().QueryRowContext(ctx, toolsQuery, string(id)).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the client tools of session %s: %w", id, err)
	}
	var specs []Spec
	if err := json.Unmarshal([]byte(raw), &specs); err != nil {
		return nil, fmt.Errorf("read the client tools of session %s: %w", id, err)
	}
	return specs, nil
}

// Call is one call of a client tool, as the client is asked it.
type Call struct {
	SessionID sessions.ID     `json:"-"`
	ID        string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// ExpiresAt is when the run stops waiting for the result.
	ExpiresAt time.Time `json:"expires_at"`
}

// Result is what the client answers a call with.
type Result struct {
	CallID string `json:"call_id"`
	// Output is what the model reads: the tool's output, or with IsError
	// what went wrong.
	Output  string `json:"output"`
	IsError bool   `json:"is_error,omitempty"`
}

// Pending is a call waiting for its result.
type Pending struct {
	hub     *Hub
	call    Call
	timeout time.Duration
	done    chan Result // holds the result once delivered
}

// Call is the call as the client is asked it.
func (p *Pending) Call() Call { return p.call }

// Expect registers a call as waiting for its result, from now until the
// timeout; Wait then waits for it. A call id already waiting in the session
// is refused.
func (h *Hub) Expect(c Call) (*Pending, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.pending[c.SessionID] {
		if p.call.ID == c.ID {
			return nil, fmt.Errorf("%w: call id %q is already waiting in session %s", ErrInvalid, c.ID, c.SessionID)
		}
	}
	timeout := h.Timeout()
	c.ExpiresAt = h.opts.Now().Add(timeout)
	p := &Pending{hub: h, call: c, timeout: timeout, done: make(chan Result, 1)}
	h.pending[c.SessionID] = append(h.pending[c.SessionID], p)
	return p, nil
}

// Wait waits for the call's result until the timeout (ErrTimeout) or ctx
// ends (its error). Either way the call stops waiting.
func (p *Pending) Wait(ctx context.Context) (Result, error) {
	var err error
	select {
	case r := <-p.done:
		return r, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-p.hub.opts.After(p.timeout):
		err = fmt.Errorf("%w: %s (call %s) had no result within %s", ErrTimeout, p.call.Name, p.call.ID, p.timeout)
	}
	if !p.hub.remove(p) {
		// Delivered meanwhile: the result is the call's answer.
		return <-p.done, nil
	}
	return Result{}, err
}

// remove stops p waiting; false if it no longer was (its result came).
func (h *Hub) remove(p *Pending) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.pending[p.call.SessionID]
	for i, q := range list {
		if q == p {
			list = append(list[:i:i], list[i+1:]...)
			if len(list) == 0 {
				delete(h.pending, p.call.SessionID)
			} else {
				h.pending[p.call.SessionID] = list
			}
			return true
		}
	}
	return false
}

// Waiting is the session's calls waiting for results, in the order asked.
func (h *Hub) Waiting(id sessions.ID) []Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Call
	for _, p := range h.pending[id] {
		out = append(out, p.call)
	}
	return out
}

// Deliver gives waiting calls of the session their results: all of them,
// or, when one names a call that is not waiting (ErrUnknownCall) or the
// session waits for none (ErrNotWaiting), none.
func (h *Hub) Deliver(id sessions.ID, results []Result) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.pending[id]
	if len(list) == 0 {
		return fmt.Errorf("%w: session %s", ErrNotWaiting, id)
	}
	byID := map[string]*Pending{}
	for _, p := range list {
		byID[p.call.ID] = p
	}
	given := map[string]bool{}
	for i, r := range results {
		switch {
		case given[r.CallID]:
			return fmt.Errorf("%w: results[%d] answers call %q again", ErrInvalid, i, r.CallID)
		case byID[r.CallID] == nil:
			return fmt.Errorf("%w: results[%d].call_id %q (answered already, timed out, or never asked); session %s waits for %s",
				ErrUnknownCall, i, r.CallID, id, callIDs(list))
		}
		given[r.CallID] = true
	}
	keep := list[:0:0]
	for _, p := range list {
		if !given[p.call.ID] {
			keep = append(keep, p)
		}
	}
	for _, r := range results {
		byID[r.CallID].done <- r
	}
	if len(keep) == 0 {
		delete(h.pending, id)
	} else {
		h.pending[id] = keep
	}
	return nil
}

func callIDs(list []*Pending) string {
	var b []byte
	for i, p := range list {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%q", p.call.ID)
	}
	return string(b)
}
