package webhooks

import (
	"context"
	"fmt"
	"strings"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
)

// Report records a delivery's reply and queues it to the hook's notify
// targets in q, the transaction that stores the reply (the gateway calls
// it: the Server is a gateway.Reporter), so the note goes through the
// outbox once, to its chats, under the reply's key, with the files the
// reply carries.
func (s *Server) Report(ctx context.Context, q dbutil.Querier, in adapters.Inbound, key, text string, files []adapters.OutFile, _ bool) error {
	hookID, _, _ := strings.Cut(in.ChatID, ":")
	if _, err := q.ExecContext(ctx, answeredQuery, "webhook:"+in.ChatID, "answered", text, "", dbutil.Millis(s.opts.Now())); err != nil {
		return fmt.Errorf("record the reply of webhook %s: %w", hookID, err)
	}
	h, ok := s.hook(hookID)
	if !ok || s.opts.QueueNote == nil {
		return nil
	}
	out := adapters.Outbound{ChatID: in.ChatID, Text: text, IdempotencyKey: key}
	for _, target := range h.Notify {
		if err := s.opts.QueueNote(ctx, q, target, text, NoteKey(out, target), files...); err != nil {
			// Reported's Notify tries it again and says so.
			s.opts.Log.DebugContext(ctx, "queue a webhook note with its reply", "hook", hookID, "target", target, "error", err)
		}
	}
	return nil
}

// Reported, once the reply committed, adds the notes to the target chats'
// conversations and answers a sync request waiting for it.
func (s *Server) Reported(ctx context.Context, in adapters.Inbound, key, text string, files []adapters.OutFile, _ bool) {
	hookID, _, _ := strings.Cut(in.ChatID, ":")
	if s.opts.OnDelivery != nil {
		s.opts.OnDelivery("answered")
	}
	out := adapters.Outbound{ChatID: in.ChatID, Text: text, IdempotencyKey: key}
	if h, ok := s.hook(hookID); ok && s.opts.Notify != nil {
		for _, target := range h.Notify {
			if err := s.opts.Notify(ctx, target, text, NoteKey(out, target), files...); err != nil {
				s.opts.Log.WarnContext(ctx, "notify a webhook's target", "hook", hookID, "target", target, "error", err)
			}
		}
	}
	s.mu.Lock()
	wait := s.waiters[in.ChatID]
	s.mu.Unlock()
	if wait != nil {
		select {
		case wait <- text:
		default:
		}
	}
}
