package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// notify sends text from a job or a hook (source) to a target,
// "<adapter id>:<chat id>": through the outbox, and into the chat's
// conversation as something the bot said, so people there can ask about it.
func (d *daemon) notify(ctx context.Context, target, text, source string) error {
	return d.notifyKeyed(ctx, target, text, "notify:"+source+":"+uuid.NewString())
}

// notifyKeyed is notify under an idempotency key: a note sent again under
// the same key (a retry after a crash) goes out once.
func (d *daemon) notifyKeyed(ctx context.Context, target, text, key string) error {
	adapter, chat, ok := strings.Cut(target, ":")
	if !ok || adapter == "" || chat == "" {
		return fmt.Errorf("notify target %q is not <adapter id>:<chat id>", target)
	}
	surface := adapter
	for _, a := range d.cfg.Adapters {
		if a.ID == adapter {
			surface = a.Type
		}
	}
	if _, ok := d.adapters[adapters.ID(adapter)]; !ok {
		return fmt.Errorf("notify target %q: no running channel is called %s", target, adapter)
	}
	// The conversation has the note before the chat shows it, so a reply
	// to it ("tell me more") finds it there.
	live, err := d.sessions.ActiveInChat(ctx, surface, chat)
	if err != nil {
		return err
	}
	for _, s := range live {
		if _, err := d.sessions.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: text}); err != nil {
			return fmt.Errorf("add the note to session %s: %w", s.ID, err)
		}
	}
	var replies []gateway.Reply
	for i, r := range adapters.Chunk(text, d.limit(adapters.ID(adapter))) {
		replies = append(replies, gateway.Reply{Key: fmt.Sprintf("%s:%d", key, i), Adapter: adapters.ID(adapter), ChatID: chat, Text: r})
	}
	if err := d.store.QueueReplies(ctx, replies); err != nil {
		return fmt.Errorf("queue a note for %s: %w", target, err)
	}
	d.sender.Wake()
	return nil
}

const (
	// seedWindow and seedNotes bound what a chat's new session starts
	// with: the notes sent to the chat in the last day, the last five.
	seedWindow = 24 * time.Hour
	seedNotes  = 5
)

// seed starts a chat's new session with the notes sent to the chat lately
// (cron reports, webhook notifications), as things the bot said: a reply
// to one finds it even when the chat had no conversation when it was sent,
// or its conversation has since been reset.
func (d *daemon) seed(ctx context.Context, s sessions.Session, in adapters.Inbound) error {
	notes, err := d.store.RecentNotes(ctx, in.Adapter, in.ChatID, time.Now().Add(-seedWindow), seedNotes)
	if err != nil {
		return err
	}
	for _, n := range notes {
		if _, err := d.sessions.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: n}); err != nil {
			return fmt.Errorf("add a note to session %s: %w", s.ID, err)
		}
	}
	return nil
}
