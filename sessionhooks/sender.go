package sessionhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
)

type due struct {
	id, session, event, url, body string
	attempt                       int
}

// Run sends due events until ctx ends, then gives back what it claimed
// and did not send.
func (h *Hooks) Run(ctx context.Context) error {
	defer h.release(ctx)
	tick := time.NewTicker(h.opts.Poll)
	defer tick.Stop()
	for {
		if len(h.opts.Hooks()) == 0 {
			// None configured: an idle database is left alone (a reload
			// that adds one is seen at the next tick).
		} else if err := h.SendDue(ctx); err != nil && ctx.Err() == nil {
			h.opts.Log.WarnContext(ctx, "send session hook events; trying again shortly", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-h.wake:
		}
	}
}

// SendDue sends every event due now, in order per session.
func (h *Hooks) SendDue(ctx context.Context) error {
	for {
		claimed, err := h.claim(ctx)
		if err != nil || len(claimed) == 0 {
			return err
		}
		for _, d := range claimed {
			if ctx.Err() != nil {
				return nil
			}
			if err := h.deliver(ctx, d); err != nil {
				return err
			}
		}
	}
}

func (h *Hooks) claim(ctx context.Context) ([]due, error) {
	now := h.opts.Now()
	lock := ""
	if h.opts.DB.Dialect == dbutil.Postgres {
		lock = claimLock
	}
	var out []due
	err := h.opts.DB.Tx(ctx, func(q dbutil.Querier) (err error) {
		out, err = dbutil.Query(ctx, q, fmt.Sprintf(claimQuery, lock), func(r dbutil.Scanner) (due, error) {
			var d due
			return d, r.Scan(&d.id, &d.session, &d.event, &d.url, &d.body, &d.attempt)
		}, dbutil.Millis(now), dbutil.Millis(now.Add(h.opts.Lease)), h.instance)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim due session hook events: %w", err)
	}
	return out, nil
}

// deliver makes one attempt at d and records it. The POST ends within
// half the lease, so no other sender claims d while it is under way.
func (h *Hooks) deliver(ctx context.Context, d due) error {
	var hook config.SessionHook
	found := false
	for _, c := range h.opts.Hooks() {
		if c.URL == d.url {
			hook, found = c, true
			break
		}
	}
	status, next, code, errText := StatusDelivered, h.opts.Now(), 0, ""
	if !found {
		status, errText = StatusFailed, "no session hook has this URL any more (the config changed); not sent"
	} else {
		pctx, cancel := context.WithTimeout(ctx, h.opts.Lease/2)
		var err error
		code, _, err = h.post(pctx, hook, d.id, d.event, []byte(d.body))
		cancel()
		if err != nil && ctx.Err() != nil {
			return nil // stopping: the claim is released, and another sender makes the attempt
		}
		if err != nil {
			errText = err.Error()
			status, next = StatusPending, h.opts.Now().Add(h.opts.Backoff(d.attempt))
			if d.attempt >= h.opts.MaxAttempts {
				status = StatusFailed
			}
			h.opts.Log.WarnContext(ctx, "a session hook event was not taken; it is sent again", "event_id", d.id, "event", d.event,
				"session_id", d.session, "attempt", d.attempt, "url", config.RedactURL(d.url), "error", err)
		}
	}
	// A POST that got through is recorded even as the process stops, or
	// another sender would POST it again.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := h.opts.DB.Write().ExecContext(rctx, recordQuery, d.id, status, dbutil.Millis(next), code, errText,
		dbutil.Millis(h.opts.Now()), d.attempt, h.instance); err != nil {
		return fmt.Errorf("record session hook event %s: %w", d.id, err)
	}
	return nil
}

func (h *Hooks) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := h.opts.DB.Write().ExecContext(ctx, releaseQuery, h.instance); err != nil && !errors.Is(err, context.Canceled) {
		h.opts.Log.WarnContext(ctx, "give back claimed session hook events; they are sent once their lease lapses", "error", err)
	}
}

// Delivery is one queued event and how its sending went.
type Delivery struct {
	ID         string    `json:"id"`
	Event      string    `json:"event"`
	URL        string    `json:"url"`
	Status     string    `json:"status"`
	Attempts   int       `json:"attempts"`
	LastStatus int       `json:"last_status,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// List is a session's events, oldest first.
func (h *Hooks) List(ctx context.Context, session string) ([]Delivery, error) {
	return dbutil.Query(ctx, h.opts.DB.Read(), listQuery, func(r dbutil.Scanner) (Delivery, error) {
		var d Delivery
		var created, updated int64
		err := r.Scan(&d.ID, &d.Event, &d.URL, &d.Status, &d.Attempts, &d.LastStatus, &d.LastError, &created, &updated)
		d.URL = config.RedactURL(d.URL)
		d.CreatedAt, d.UpdatedAt = dbutil.Time(created), dbutil.Time(updated)
		return d, err
	}, session)
}
