package telemetry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A turn's reply is sent later, from the outbox, and a reply callback
// from its own queue, each by a loop that reads rows, not contexts. The
// turn leaves its span here under the row's id (Remember), and the loop
// takes it back (Recall) to put the send under the turn. Only sampled
// spans are kept, for handoffTTL, and at most handoffCap of them: a row
// sent after that, or after a restart, is sent under no trace.
const (
	handoffTTL = 10 * time.Minute
	handoffCap = 50000
)

type handed struct {
	p  Parent
	at time.Time
}

// handoffs is one table for the process: its keys are record ids
// (UUIDv7), unique across the daemons a process may run.
var handoffs struct {
	used atomic.Bool // once anything was remembered: Recall costs nothing before
	mu   sync.Mutex
	byID map[string]handed
}

// Remember keeps ctx's span under key, for Recall; nothing when ctx has no
// sampled span.
func Remember(ctx context.Context, key string) {
	p := ParentOf(ctx)
	if p.t == nil || !p.sc.IsSampled() || key == "" {
		return
	}
	now := time.Now()
	handoffs.used.Store(true)
	handoffs.mu.Lock()
	defer handoffs.mu.Unlock()
	if handoffs.byID == nil {
		handoffs.byID = map[string]handed{}
	}
	if len(handoffs.byID) >= handoffCap {
		for k, h := range handoffs.byID {
			if now.Sub(h.at) > handoffTTL {
				delete(handoffs.byID, k)
			}
		}
		if len(handoffs.byID) >= handoffCap {
			return
		}
	}
	handoffs.byID[key] = handed{p: p, at: now}
}

// Recall is ctx under the span Remember kept for key, or ctx as it is.
func Recall(ctx context.Context, key string) context.Context {
	if !handoffs.used.Load() {
		return ctx
	}
	handoffs.mu.Lock()
	h, ok := handoffs.byID[key]
	if ok && time.Since(h.at) > handoffTTL {
		delete(handoffs.byID, key)
		ok = false
	}
	handoffs.mu.Unlock()
	if !ok {
		return ctx
	}
	return h.p.Into(ctx)
}
