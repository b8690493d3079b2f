package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/internal/sleep"
)

// settle decides, once the database answers, what becomes of an accepted
// message a database fault left undecided: if it is stored and still
// unanswered, run dispatches it; otherwise it is recorded as not run (its
// sender was told to send it again). It gives up at shutdown, when the
// next start's recovery takes the message.
func (g *Gateway) settle(j job, run bool) {
	defer g.settles.Done()
	ctx := g.lanes.ctx
	var status InboundStatus
	var err error
	// A commit whose connection died may land a moment after the error
	// came back: a message not found is looked for once more.
	for look := range 2 {
		if look > 0 {
			t := time.NewTimer(settleRecheck)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		err = g.untilStored(ctx, ctx, "settle a message the database failed under", func() (err error) {
			status, err = g.opts.Store.Status(ctx, j.inboundID)
			return err
		})
		if !errors.Is(err, ErrNotFound) {
			break
		}
	}
	switch {
	case errors.Is(err, ErrNotFound) || status != InboundAccepted && err == nil:
		g.takeSettling(j.in)
		return // never stored, or answered already
	case err != nil:
		g.opts.Log.WarnContext(ctx, "settle a message the database failed under; the next start takes it", "inbound_id", j.inboundID, "error", err)
		return
	case run:
		if j, ok := g.takeSettling(j.in); ok { // else its redelivery ran it
			g.dispatch(ctx, j)
		}
	default:
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundFailed, err: "not run: its sender was told the database was unavailable", replyTo: j})
	}
}

// settleRecheck is how long settle waits before looking again for a
// message it didn't find.
const settleRecheck = 2 * time.Second

// settleKey names a platform message.
type settleKey struct{ adapter, chat, message string }

func keyOf(in adapters.Inbound) settleKey {
	return settleKey{string(in.Adapter), in.ChatID, in.MessageID}
}

// startSettle settles j in the background (see settle); a message to run
// waits in settling, so its redelivery can take it first.
func (g *Gateway) startSettle(j job, run bool) {
	if run {
		g.settlingMu.Lock()
		if g.settling == nil {
			g.settling = map[settleKey]job{}
		}
		g.settling[keyOf(j.in)] = j
		g.settlingMu.Unlock()
	}
	// Once the lanes are closed, Close may be waiting for the settles:
	// none starts then (the next start's recovery takes the message).
	g.lanes.mu.Lock()
	closed := g.lanes.closed
	if !closed {
		g.settles.Add(1)
	}
	g.lanes.mu.Unlock()
	if closed {
		g.takeSettling(j.in)
		return
	}
	go g.settle(j, run)
}

// takeSettling takes the settling message in names, if there is one.
func (g *Gateway) takeSettling(in adapters.Inbound) (job, bool) {
	g.settlingMu.Lock()
	defer g.settlingMu.Unlock()
	j, ok := g.settling[keyOf(in)]
	delete(g.settling, keyOf(in))
	return j, ok
}

// untilStored runs fn until it succeeds or fails for a reason other than
// the database being unavailable, waiting between tries (up to
// StoreRetry) for as long as wait lasts. It returns fn's last error.
func (g *Gateway) untilStored(ctx, wait context.Context, what string, fn func() error) error {
	delay := 100 * time.Millisecond
	for tries := 1; ; tries++ {
		err := fn()
		if err == nil || !dbutil.Unavailable(err) || wait.Err() != nil {
			return err
		}
		level := slog.LevelDebug
		if tries == 1 {
			level = slog.LevelWarn
		}
		g.opts.Log.Log(ctx, level, "the database is unavailable; trying again once it answers", "what", what, "tries", tries, "error", err)
		if sleep.For(wait, delay) != nil {
			return err
		}
		delay = min(delay*2, g.opts.StoreRetry)
	}
}
