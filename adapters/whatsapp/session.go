package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/textcut"
)

// keepAliveMaxFail is how long failing keepalives are borne before the
// connection is dropped and made again (whatsmeow's own figure).
var keepAliveMaxFail = whatsmeow.KeepAliveMaxFailTime

// end says why a session ended.
type end int

const (
	endStopped   end = iota // ctx ended
	endLoggedOut            // the phone (or WhatsApp) unlinked the device
	endReplaced             // another client connected with this device
)

// signalKind is a connection event, as the session loop sees it.
type signalKind int

const (
	sigConnected signalKind = iota
	sigDisconnected
	sigLoggedOut
	sigReplaced
	sigFailure  // a connect failure that a later attempt may get past
	sigBanned   // a temporary ban; wait says how long
	sigOutdated // WhatsApp refuses this client version
	sigStale    // keepalives have failed for too long
	sigPushName // the account's name arrived; presence can be sent
)

type signal struct {
	kind   signalKind
	detail string
	wait   time.Duration
}

// signals is an unbounded queue from whatsmeow's event handlers, which
// must never block, to the session loop.
type signals struct {
	mu    sync.Mutex
	queue []signal
	ready chan struct{} // holds a token while the queue is not empty
}

func newSignals() *signals { return &signals{ready: make(chan struct{}, 1)} }

func (s *signals) push(sg signal) {
	s.mu.Lock()
	s.queue = append(s.queue, sg)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *signals) take() []signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// session keeps c connected until ctx ends, the device is logged out or
// another client takes its place, reconnecting with backoff between
// reconnect.min and reconnect.max.
func (a *Adapter) session(ctx context.Context, c client, sink adapters.Sink) end {
	sig := newSignals()
	// Handlers get their own context, ended with the session, so a
	// delivery still retrying lets go (its message stays unacknowledged)
	// and the handler can be removed.
	handlerCtx, stopHandlers := context.WithCancel(ctx)
	handler := c.AddEventHandlerWithSuccessStatus(func(evt any) bool { return a.handle(handlerCtx, c, sink, sig, evt) })
	a.setClient(c)
	defer func() {
		a.setClient(nil)
		stopHandlers()
		c.Disconnect()
		c.RemoveEventHandler(handler)
	}()

	backoff := a.cfg.reconnectMin
	next := func() time.Duration {
		d := backoff
		backoff = min(backoff*2, a.cfg.reconnectMax)
		return d
	}
	// retry waits d, then reconnects; false when ctx ended first.
	retry := func(d time.Duration, detail string) bool {
		a.setHealth(false, fmt.Sprintf("%s; reconnecting in %s", detail, d))
		select {
		case <-ctx.Done():
			return false
		case <-a.after(d):
			return true
		}
	}
	// reconnect logs msg (with args) and the backoff's next wait, then
	// retries after it; false when ctx ended first.
	reconnect := func(msg, detail string, args ...any) bool {
		d := next()
		a.log.WarnContext(ctx, msg, append(args, "retry_in", d)...)
		return retry(d, detail)
	}
	presenceDue := false

connect:
	for {
		if ctx.Err() != nil {
			return endStopped
		}
		a.setHealth(false, "connecting")
		switch err := c.Connect(); {
		case errors.Is(err, whatsmeow.ErrAlreadyConnected):
			if c.IsLoggedIn() {
				sig.push(signal{kind: sigConnected})
			}
		case errors.Is(err, store.ErrDeviceDeleted):
			sig.push(signal{kind: sigLoggedOut, detail: "device deleted"})
		case err != nil:
			if !reconnect("whatsapp connect failed", "disconnected: "+err.Error(), "error", err) {
				return endStopped
			}
			continue connect
		}
		for {
			select {
			case <-ctx.Done():
				return endStopped
			case <-sig.ready:
			}
			for _, s := range sig.take() {
				switch s.kind {
				case sigConnected:
					backoff = a.cfg.reconnectMin
					pn, _ := c.ownJIDs()
					a.setHealth(true, "connected")
					a.log.InfoContext(ctx, "whatsapp connected", "account", pn.User)
					presenceDue = a.cfg.presence
				case sigPushName:
				case sigDisconnected:
					if c.IsConnected() {
						continue // from a connection already replaced by a newer one
					}
					if !reconnect("whatsapp disconnected", "disconnected") {
						return endStopped
					}
					continue connect
				case sigStale:
					c.Disconnect()
					if !reconnect("whatsapp keepalives failing; reconnecting", "disconnected: keepalives failing") {
						return endStopped
					}
					continue connect
				case sigFailure:
					if !reconnect("whatsapp connect failure", "connect failure: "+s.detail, "reason", s.detail) {
						return endStopped
					}
					continue connect
				case sigBanned:
					d := s.wait
					if d <= 0 {
						d = a.cfg.reconnectMax
					}
					a.log.ErrorContext(ctx, "whatsapp account temporarily banned", "detail", s.detail, "retry_in", d)
					if !retry(d, "temporarily banned: "+s.detail) {
						return endStopped
					}
					continue connect
				case sigOutdated:
					d := a.cfg.reconnectMax
					a.log.ErrorContext(ctx, "whatsapp refused this client version; update parley", "retry_in", d)
					if !retry(d, "client outdated: WhatsApp refused this version; update parley") {
						return endStopped
					}
					continue connect
				case sigLoggedOut:
					a.log.ErrorContext(ctx, "whatsapp logged out: link again with parley whatsapp link",
						"command", "parley whatsapp link --adapter "+string(a.id), "reason", s.detail)
					a.setHealth(false, "logged out: link again with "+a.linkHint())
					return endLoggedOut
				case sigReplaced:
					a.log.ErrorContext(ctx, "whatsapp connection replaced by another client using this device; not reconnecting",
						"hint", "run one parley instance per WhatsApp device")
					a.setHealth(false, "replaced: another client connected with this device; restart parley to take it back")
					return endReplaced
				}
			}
			if presenceDue {
				// WhatsApp shows "typing…" only from an account that is
				// online; it takes the presence once it knows the name.
				switch err := c.SendPresence(ctx, types.PresenceAvailable); {
				case err == nil:
					presenceDue = false
				case errors.Is(err, whatsmeow.ErrNoPushName):
					// again when the name arrives (sigPushName)
				default:
					presenceDue = false
					a.log.WarnContext(ctx, "whatsapp presence not sent", "error", err)
				}
			}
		}
	}
}

// handle is whatsmeow's event handler. It returns false only for a
// message the sink did not take, which leaves it unacknowledged.
func (a *Adapter) handle(ctx context.Context, c client, sink adapters.Sink, sig *signals, evt any) bool {
	switch e := evt.(type) {
	case *events.Message:
		return a.receive(ctx, c, sink, e)
	case *events.Connected:
		sig.push(signal{kind: sigConnected})
	case *events.PushNameSetting:
		sig.push(signal{kind: sigPushName})
	case *events.Disconnected:
		sig.push(signal{kind: sigDisconnected})
	case *events.KeepAliveTimeout:
		if !e.LastSuccess.IsZero() && time.Since(e.LastSuccess) > keepAliveMaxFail {
			sig.push(signal{kind: sigStale})
		}
	case *events.LoggedOut:
		sig.push(signal{kind: sigLoggedOut, detail: e.PermanentDisconnectDescription()})
	case *events.StreamReplaced:
		sig.push(signal{kind: sigReplaced})
	case *events.TemporaryBan:
		sig.push(signal{kind: sigBanned, detail: e.String(), wait: e.Expire})
	case *events.ClientOutdated:
		sig.push(signal{kind: sigOutdated})
	case *events.ConnectFailure:
		sig.push(signal{kind: sigFailure, detail: fmt.Sprintf("%d %s", int(e.Reason), e.Reason.String())})
	}
	return true
}

// receive hands one message to the sink, and sends its read receipt once
// the sink took it. false leaves the message unacknowledged.
func (a *Adapter) receive(ctx context.Context, c client, sink adapters.Sink, evt *events.Message) bool {
	in, skip := convert(ctx, a.id, c, evt)
	if skip != "" {
		a.log.DebugContext(ctx, "whatsapp message not taken", "reason", skip, "message_id", evt.Info.ID)
		return true
	}
	// Known before delivery: a reaction on it (ack_reaction) names its sender.
	a.quotes.put(in.ChatID, in.MessageID, quote{sender: evt.Info.Sender.ToNonAD(), text: textcut.Runes(in.Text, quoteRunes, "…")})
	switch a.deliver(ctx, sink, in) {
	case notStored:
		return false
	case dropped:
		return true
	}
	if a.cfg.readReceipts {
		if err := c.MarkRead(ctx, []types.MessageID{evt.Info.ID}, time.Now(), evt.Info.Chat, evt.Info.Sender); err != nil {
			a.log.WarnContext(ctx, "whatsapp read receipt not sent", "chat_id", in.ChatID, "message_id", in.MessageID, "error", err)
		}
	}
	return true
}

// outcome is what became of a message offered to the sink.
type outcome int

const (
	stored    outcome = iota
	dropped           // the gateway can never take it
	notStored         // ctx ended first
)

// deliver offers in to the sink until it is stored or ctx ends. A message
// the gateway can never take (ErrInvalidInbound) is dropped, logged, so
// it doesn't hold up the messages behind it.
func (a *Adapter) deliver(ctx context.Context, sink adapters.Sink, in adapters.Inbound) outcome {
	for n := 1; ; n++ {
		err := sink.Deliver(ctx, in)
		switch {
		case err == nil:
			return stored
		case errors.Is(err, adapters.ErrInvalidInbound):
			a.log.ErrorContext(ctx, "whatsapp message refused by the gateway; dropped", "chat_id", in.ChatID, "message_id", in.MessageID, "error", err)
			return dropped
		case ctx.Err() != nil:
			a.log.WarnContext(ctx, "whatsapp message not stored before stop; WhatsApp sends it again", "chat_id", in.ChatID, "message_id", in.MessageID)
			return notStored
		}
		d := a.deliverBackoff(n)
		a.log.WarnContext(ctx, "whatsapp message not stored; retrying", "chat_id", in.ChatID, "message_id", in.MessageID, "attempt", n, "retry_in", d, "error", err)
		select {
		case <-ctx.Done():
			a.log.WarnContext(ctx, "whatsapp message not stored before stop; WhatsApp sends it again", "chat_id", in.ChatID, "message_id", in.MessageID)
			return notStored
		case <-a.after(d):
		}
	}
}

// quoteRunes is how much of a message a quoted reply repeats.
const quoteRunes = 500
