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
// spans are kept, in two generations: the current one takes what is
// remembered until it is handoffAge old or holds handoffCap spans, then
// becomes the previous one, and the one before is dropped. A span is so
// kept for at least one generation; a row sent after that, or after a
// restart, is sent under no trace.
const (
	handoffAge = 5 * time.Minute
	handoffCap = 50000
)

// handoffs is one table for the process: its keys are record ids
// (UUIDv7), unique across the daemons a process may run.
var handoffs struct {
	used      atomic.Bool // once anything was remembered: Recall costs nothing before
	mu        sync.Mutex
	cur, prev map[string]Parent
	since     time.Time // when cur began
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
	if handoffs.cur == nil || now.Sub(handoffs.since) > handoffAge || len(handoffs.cur) >= handoffCap {
		handoffs.prev, handoffs.cur, handoffs.since = handoffs.cur, make(map[string]Parent), now
	}
	handoffs.cur[key] = p
}

// Recall is ctx under the span Remember kept for key, or ctx as it is.
func Recall(ctx context.Context, key string) context.Context {
	if !handoffs.used.Load() {
		return ctx
	}
	handoffs.mu.Lock()
	p, ok := handoffs.cur[key]
	if !ok {
		p, ok = handoffs.prev[key]
	}
	handoffs.mu.Unlock()
	if !ok {
		return ctx
	}
	return p.Into(ctx)
}
