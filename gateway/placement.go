package gateway

import (
	"context"

	"github.com/parleyd/parley/sessions"
)

// Placement decides which replica runs a session's turns.
type Placement interface {
	// Place claims the lane for this replica if nobody live holds it, and
	// returns the hold's name and its holder; here reports that the
	// holder is this replica.
	Place(ctx context.Context, lane string) (hold, holder string, here bool, err error)
}

// place places j (placeHere), holding order shared while a job placed
// here is queued: unlock, when here, lets it go. A session held by a
// dead replica whose messages nobody took over yet is taken over here
// first, so j runs after them.
func (g *Gateway) place(ctx context.Context, j job) (unlock func(), here bool) {
	if j.takenOver {
		// Recovery holds order already.
		here, _ = g.placeHere(ctx, j, false)
		return func() {}, here
	}
	g.order.RLock()
	here, dead := g.placeHere(ctx, j, true)
	if !dead {
		if !here {
			g.order.RUnlock()
			return nil, false
		}
		return g.order.RUnlock, true
	}
	g.order.RUnlock()
	if n, err := g.TakeOver(ctx); err != nil && ctx.Err() == nil {
		g.opts.Log.WarnContext(ctx, "take over the messages of a dead replica holding a message's session", "inbound_id", j.inboundID, "error", err)
	} else if n > 0 {
		g.opts.Log.InfoContext(ctx, "took over the messages of a dead replica holding a message's session", "count", n)
	}
	g.order.RLock()
	if here, _ = g.placeHere(ctx, j, false); !here {
		g.order.RUnlock()
		return nil, false
	}
	return g.order.RUnlock, true
}

// placeHere reports whether j's session runs on this replica; if another
// replica holds it, j is handed to that one. A database that fails the
// placement leaves j to settle once it answers. With stopAtDead, a
// holder that is not live (dead, its messages not yet taken over)
// returns dead instead, for the caller to take them over first.
func (g *Gateway) placeHere(ctx context.Context, j job, stopAtDead bool) (here, dead bool) {
	for range 3 {
		hold, holder, here, err := g.opts.Placement.Place(ctx, laneKey(j.key))
		if err == nil && here {
			return true, false
		}
		if err == nil {
			var ok bool
			if ok, err = g.opts.Store.Forward(ctx, j.inboundID, hold, holder); err == nil && ok {
				g.opts.Log.DebugContext(ctx, "message handed to the replica holding its session", "inbound_id", j.inboundID, "replica", holder)
				return false, false
			}
		}
		if err != nil {
			g.opts.Log.WarnContext(ctx, "place a message's session among the replicas; it runs once the database answers", "inbound_id", j.inboundID, "error", err)
			break
		}
		if stopAtDead {
			return false, true
		}
		// The holder died meanwhile: claim again.
	}
	// Placed nowhere yet: settle places it again a moment later (it stays
	// accepted, and this replica's, meanwhile).
	j.refused = nil
	g.startSettle(j, true)
	return false, false
}

// Pickup dispatches the messages other replicas handed to this one (see
// Placement), oldest first, each once. Call it when told of a handover,
// and now and then in case a notice was missed.
func (g *Gateway) Pickup(ctx context.Context) (int, error) {
	g.pickMu.Lock()
	defer g.pickMu.Unlock()
	rows, err := g.opts.Store.Forwarded(ctx, recoverBatch)
	if err != nil {
		return 0, err
	}
	waiting := make(map[string]bool, len(rows))
	n := 0
	for _, r := range rows {
		waiting[r.ID] = true
		if g.picked[r.ID] {
			continue
		}
		n++
		g.dispatch(ctx, job{inboundID: r.ID, in: r.Inbound, repair: sessions.ID(r.SessionID)})
	}
	// Forget the answered ones; the rest stay dispatched.
	g.picked = waiting
	return n, nil
}

// TakeOverDead takes a dead replica's work over: the messages it accepted
// and never answered (TakeOver), then the replies it claimed and never
// recorded, which the sender sends again (each may reach its chat twice).
// Replicas sharing PostgreSQL call it every lease.
func (g *Gateway) TakeOverDead(ctx context.Context) {
	n, err := g.TakeOver(ctx)
	if err != nil && ctx.Err() == nil {
		g.opts.Log.Warn("take over the messages of a dead replica", "error", err)
	}
	if n > 0 {
		g.opts.Log.Info("took over the messages of a dead replica", "count", n)
	}
	if n, err := g.opts.Store.Reclaim(ctx); err != nil && ctx.Err() == nil {
		g.opts.Log.Warn("take back the replies a dead replica claimed", "error", err)
	} else if n > 0 {
		g.opts.Log.Info("took back the replies a dead replica claimed and never recorded; each may reach its chat twice", "count", n)
		if s := g.opts.Sender; s != nil {
			if s.opts.OnReclaim != nil {
				s.opts.OnReclaim(n)
			}
			s.Wake()
		}
	}
}
