package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/parleyd/parley/adapters"
)

// ackTimeout bounds one reaction call: it runs beside the turn, which
// never waits for it.
const ackTimeout = 10 * time.Second

// acks are the reactions (a channel's ack_reaction) on the messages this
// replica took for a turn and has not answered yet, by inbound id. A
// reaction is put on when a message is queued for its turn and taken away
// when its turn's outcome is recorded; both calls run apart, so a slow or
// refusing platform never holds up or fails a turn.
type acks struct {
	mu sync.Mutex
	m  map[string]*ack
	// warned are the channels whose refusal was logged: once each.
	warned map[adapters.ID]bool
}

// ack is one message's reaction.
type ack struct {
	react   adapters.Reactor
	adapter adapters.ID
	chat    string
	message string
	emoji   string
	// reacting: the call putting it on is under way; answered: its
	// message was answered meanwhile, so that call takes it away after.
	reacting, answered bool
}

// acknowledge puts the channel's ack reaction on j's message, if the
// channel has one and this replica runs the channel. It returns at once.
func (g *Gateway) acknowledge(ctx context.Context, j job) {
	emoji := g.policies().access[j.in.Adapter].AckReaction
	if emoji == "" || j.in.MessageID == "" || !g.opts.Store.holds(string(j.in.Adapter)) {
		return
	}
	r := g.capabilities(j.in.Adapter).React
	if r == nil {
		g.ackRefused(ctx, j.in.Adapter, "the channel can't react to messages; ack_reaction does nothing there", nil)
		return
	}
	a := &ack{react: r, adapter: j.in.Adapter, chat: j.in.ChatID, message: j.in.MessageID, emoji: emoji, reacting: true}
	g.acks.mu.Lock()
	if g.acks.m == nil {
		g.acks.m = map[string]*ack{}
	}
	if _, ok := g.acks.m[j.inboundID]; ok {
		g.acks.mu.Unlock()
		return
	}
	g.acks.m[j.inboundID] = a
	g.acks.mu.Unlock()
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		err := r.React(rctx, a.chat, a.message, a.emoji)
		cancel()
		g.acks.mu.Lock()
		a.reacting = false
		answered := a.answered
		if err != nil || answered {
			delete(g.acks.m, j.inboundID)
		}
		g.acks.mu.Unlock()
		switch {
		case err != nil:
			g.ackRefused(ctx, a.adapter, "ack reaction refused; messages go on without it: set the channel's ack_reaction to an emoji the platform takes, or remove it", err)
		case answered:
			g.unreact(ctx, a)
		}
	}()
}

// acknowledged takes the ack reaction off each of jobs' messages that has
// one: they are answered (or ended without an answer).
func (g *Gateway) acknowledged(ctx context.Context, jobs []job) {
	g.acks.mu.Lock()
	if len(g.acks.m) == 0 {
		g.acks.mu.Unlock()
		return
	}
	var done []*ack
	for _, j := range jobs {
		a, ok := g.acks.m[j.inboundID]
		if !ok {
			continue
		}
		if a.reacting {
			a.answered = true // taken away once it is on
			continue
		}
		delete(g.acks.m, j.inboundID)
		done = append(done, a)
	}
	g.acks.mu.Unlock()
	for _, a := range done {
		go g.unreact(ctx, a)
	}
}

func (g *Gateway) unreact(ctx context.Context, a *ack) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	if err := a.react.Unreact(rctx, a.chat, a.message, a.emoji); err != nil {
		g.opts.Log.DebugContext(ctx, "ack reaction not taken away", "adapter", a.adapter, "chat_id", a.chat, "message_id", a.message, "error", err)
	}
}

// ackRefused logs a channel's first refused reaction as a warning, and
// the rest at debug level: one refusal says what the operator needs.
func (g *Gateway) ackRefused(ctx context.Context, adapter adapters.ID, msg string, err error) {
	g.acks.mu.Lock()
	first := !g.acks.warned[adapter]
	if first {
		if g.acks.warned == nil {
			g.acks.warned = map[adapters.ID]bool{}
		}
		g.acks.warned[adapter] = true
	}
	g.acks.mu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelWarn
	}
	args := []any{"adapter", adapter}
	if err != nil {
		args = append(args, "error", err)
	}
	g.opts.Log.Log(ctx, level, msg, args...)
}
