package gateway

import (
	"context"
	"errors"

	"github.com/parleyd/parley/sessions"
)

// alreadyAnswered queues the answer a recovered message's turn stored
// before the crash, if it did, and reports whether it had one.
func (g *Gateway) alreadyAnswered(ctx context.Context, j job) bool {
	var reply string
	var ok bool
	err := g.untilStored(ctx, ctx, "read a recovered message's answer", func() (err error) {
		reply, ok, err = g.opts.Runner.Answered(ctx, j.repair, sessions.MessageID(j.inboundID))
		return err
	})
	if err != nil {
		// Its session is gone (deleted), say: run it again.
		g.opts.Log.WarnContext(ctx, "read a recovered message's answer; it runs again", "session_id", j.repair, "error", err)
		return false
	}
	if ok {
		g.opts.Log.InfoContext(ctx, "a recovered message was answered before the crash; its answer is sent", "session_id", j.repair, "inbound_id", j.inboundID)
		g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, session: j.repair, replyTo: j, text: reply})
	}
	return ok
}

// repair finalizes the sessions a crash interrupted, once each.
func (g *Gateway) repair(ctx context.Context, items []job) {
	done := map[sessions.ID]bool{}
	for _, j := range items {
		if j.repair == "" || done[j.repair] {
			continue
		}
		done[j.repair] = true
		if err := g.opts.Runner.Repair(ctx, j.repair); err != nil && !errors.Is(err, sessions.ErrNotFound) {
			g.opts.Log.ErrorContext(ctx, "finalize a session a crash interrupted", "session_id", j.repair, "error", err)
		}
	}
}

// Recover handles messages a crash left unanswered: runs them again or
// marks them and says so, per Options.Recovery. Call it before adapters start.
func (g *Gateway) Recover(ctx context.Context) (int, error) {
	return g.recover(ctx, true)
}

// TakeOver answers messages that another replica accepted and stopped
// renewing: it died. Replicas sharing PostgreSQL call it every lease.
func (g *Gateway) TakeOver(ctx context.Context) (int, error) {
	return g.recover(ctx, false)
}

func (g *Gateway) recover(ctx context.Context, starting bool) (int, error) {
	// Every message taken over is queued before a newer one is placed.
	g.order.Lock()
	defer g.order.Unlock()
	total := 0
	var last []AcceptedInbound
	for {
		un, err := g.opts.Store.Unfinished(ctx, recoverBatch, starting, last...)
		if err != nil {
			return total, err
		}
		if err := g.recoverBatch(ctx, un); err != nil {
			return total, err
		}
		total += len(un)
		if len(un) < recoverBatch {
			if total > 0 {
				g.opts.Log.InfoContext(ctx, "recovered unanswered messages", "count", total, "recovery", g.opts.Recovery)
			}
			return total, nil
		}
		last = un[len(un)-1:]
	}
}

// recoverBatch is how many unanswered messages recovery takes at a time.
const recoverBatch = 1000

func (g *Gateway) recoverBatch(ctx context.Context, un []AcceptedInbound) error {
	for _, u := range un {
		// On the lane, so a session is finalized between turns, never
		// under one this replica is running.
		g.dispatch(ctx, job{inboundID: u.ID, in: u.Inbound, repair: sessions.ID(u.SessionID), mark: g.opts.Recovery == RecoveryMark, takenOver: true})
	}
	return nil
}
