package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// noteRows are the outbox rows of a note to target, chunked at its
// channel's limit, and the chat's surface and id.
func (d *Daemon) noteRows(target, text, key string) (replies []gateway.Reply, surface, chat string, err error) {
	adapter, chat, ok := strings.Cut(target, ":")
	if !ok || adapter == "" || chat == "" {
		return nil, "", "", fmt.Errorf("notify target %q is not <adapter id>:<chat id>", target)
	}
	surface = adapter
	for _, a := range d.cfg().Adapters {
		if a.ID == adapter {
			surface = a.Type
		}
	}
	if _, ok := d.adapters[adapters.ID(adapter)]; !ok {
		return nil, "", "", fmt.Errorf("notify target %q: no running channel is called %s", target, adapter)
	}
	for i, r := range adapters.Chunk(text, d.limit(adapters.ID(adapter))) {
		replies = append(replies, gateway.Reply{Key: fmt.Sprintf("%s:%d", key, i), Adapter: adapters.ID(adapter), ChatID: chat, Text: r})
	}
	return replies, surface, chat, nil
}

// queueNote queues a note to target in q, the transaction that stores the
// reply of the run that sends it: a cron job's or a webhook's report goes
// through the outbox once, to its chat.
func (d *Daemon) queueNote(ctx context.Context, q dbutil.Querier, target, text, key string) error {
	replies, _, _, err := d.noteRows(target, text, key)
	if err != nil {
		return err
	}
	return d.store.CompleteIn(ctx, q, nil, "", "", "", replies)
}

// notify sends text from a hook to a target, "<adapter id>:<chat id>",
// under the key the hook gives it (stable across a retried reply): through
// the outbox, and into the chat's conversation as something the bot said,
// so people there can ask about it.
func (d *Daemon) notify(ctx context.Context, target, text, key string) error {
	return d.notifyKeyed(ctx, target, text, key)
}

// notifyKeyed is notify under an idempotency key: a note sent again under
// the same key (a retry after a crash) goes out once.
func (d *Daemon) notifyKeyed(ctx context.Context, target, text, key string) error {
	replies, surface, chat, err := d.noteRows(target, text, key)
	if err != nil {
		return err
	}
	// Queued first, then added to the chat's conversations: a session
	// created meanwhile is seeded with it (seed), and a message's id made
	// of the note's and the session's adds it to each session once. A run
	// whose reply queued its notes already (queueNote, in the reply's
	// transaction) queues nothing here: the keys are the same.
	if err := d.store.QueueReplies(ctx, replies); err != nil {
		return fmt.Errorf("queue a note for %s: %w", target, err)
	}
	live, err := d.sessions.ActiveInChat(ctx, surface, chat)
	if err != nil {
		return err
	}
	for _, s := range live {
		for _, r := range replies {
			if err := d.addNote(ctx, s.ID, gateway.Note{Key: r.Key, Text: r.Text}); err != nil {
				return err
			}
		}
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
func (d *Daemon) seed(ctx context.Context, s sessions.Session, in adapters.Inbound) (bool, error) {
	notes, err := d.store.RecentNotes(ctx, in.Adapter, in.ChatID, time.Now().Add(-seedWindow), seedNotes)
	if err != nil {
		return false, err
	}
	for i, n := range notes {
		if err := d.addNote(ctx, s.ID, n); err != nil {
			return i > 0, err
		}
	}
	return len(notes) > 0, nil
}

// noteSpace names the ids of notes' messages.
var noteSpace = uuid.MustParse("5b0c6a43-3d1e-4d2f-9a53-6c1f0e7d2b84")

// addNote adds a note's message to a session, as something the bot said,
// once: its id is made of the note's and the session's.
func (d *Daemon) addNote(ctx context.Context, id sessions.ID, n gateway.Note) error {
	mid := uuid.NewSHA1(noteSpace, []byte(string(id)+"\x00"+n.Key)).String()
	if _, err := d.sessions.Append(ctx, id, sessions.Message{ID: sessions.MessageID(mid), Role: sessions.RoleAssistant, Content: n.Text}); err != nil {
		return fmt.Errorf("add a note to session %s: %w", id, err)
	}
	return nil
}
