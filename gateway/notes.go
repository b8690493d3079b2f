package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

// Notes are what the bot says in a chat unasked: a cron job's report, a
// webhook's notification. Each goes through the outbox once, and into the
// chat's conversations as something the bot said, so people there can ask
// about it; a chat's next new session starts with the latest ones.

const (
	// seedWindow and seedNotes bound what a chat's new session starts
	// with: the notes sent to the chat in the last day, the last five.
	seedWindow = 24 * time.Hour
	seedNotes  = 5
)

// noteSpace names the ids of notes' messages.
var noteSpace = uuid.MustParse("5b0c6a43-3d1e-4d2f-9a53-6c1f0e7d2b84")

// chatSessions finds a chat's active sessions, where a note joins the
// conversation (sessions.SQLStore does).
type chatSessions interface {
	ActiveInChat(ctx context.Context, surface, chatID string) ([]sessions.Session, error)
}

// noteRows are the outbox rows of a note to target, "<adapter id>:<chat
// id>", chunked at its channel's limit, and the chat's surface and id.
func (g *Gateway) noteRows(target, text, key string, files []adapters.OutFile) (replies []Reply, surface, chat string, err error) {
	adapter, chat, ok := strings.Cut(target, ":")
	if !ok || adapter == "" || chat == "" {
		return nil, "", "", fmt.Errorf("notify target %q is not <adapter id>:<chat id>", target)
	}
	id := adapters.ID(adapter)
	ad, ok := g.opts.Channels.Adapter(id)
	if !ok {
		return nil, "", "", fmt.Errorf("notify target %q: no running channel is called %s", target, adapter)
	}
	surface = adapter
	if g.opts.Surface != nil {
		if s := g.opts.Surface(id); s != "" {
			surface = s
		}
	}
	for i, r := range adapters.Chunk(text, g.caps.Of(id, ad).MaxMessageLength) {
		replies = append(replies, Reply{Key: fmt.Sprintf("%s:%d", key, i), Adapter: id, ChatID: chat, Text: r})
	}
	for i, f := range files {
		replies = append(replies, Reply{Key: fmt.Sprintf("%s:f%d", key, i), Adapter: id, ChatID: chat, Text: f.Caption,
			FileSession: f.Session, FileName: f.Name})
	}
	return replies, surface, chat, nil
}

// QueueNote queues a note to target in q, the transaction that stores the
// reply of the run that sends it: a cron job's or a webhook's report goes
// through the outbox once, to its chat, with the files it carries (each
// naming the session whose file store holds it).
func (g *Gateway) QueueNote(ctx context.Context, q dbutil.Querier, target, text, key string, files ...adapters.OutFile) error {
	replies, _, _, err := g.noteRows(target, text, key, files)
	if err != nil {
		return err
	}
	return g.opts.Store.CompleteIn(ctx, q, nil, "", "", "", replies)
}

// Notify sends text to target, "<adapter id>:<chat id>", under key (stable
// across a retried reply, so a note sent again goes out once): through the
// outbox, and into the chat's active conversations, with the files it
// carries.
func (g *Gateway) Notify(ctx context.Context, target, text, key string, files ...adapters.OutFile) error {
	replies, surface, chat, err := g.noteRows(target, text, key, files)
	if err != nil {
		return err
	}
	// Queued first, then added to the chat's conversations: a session
	// created meanwhile is seeded with it, and a message's id made of the
	// note's and the session's adds it to each session once. A run whose
	// reply queued its notes already (QueueNote, in the reply's
	// transaction) queues nothing here: the keys are the same.
	if err := g.opts.Store.QueueReplies(ctx, replies); err != nil {
		return fmt.Errorf("queue a note for %s: %w", target, err)
	}
	if cs, ok := g.opts.Sessions.(chatSessions); ok {
		live, err := cs.ActiveInChat(ctx, surface, chat)
		if err != nil {
			return err
		}
		for _, s := range live {
			for _, r := range replies {
				text := r.Text
				if r.FileName != "" {
					text = noteFileText(r.FileName, r.Text)
				}
				if err := g.addNote(ctx, s.ID, Note{Key: r.Key, Text: text}); err != nil {
					return err
				}
			}
		}
	}
	if g.opts.Sender != nil {
		g.opts.Sender.Wake()
	}
	return nil
}

// SeedNotes starts a chat's new session with the notes sent to the chat
// lately, as things the bot said: a reply to one finds it even when the
// chat had no conversation when it was sent, or its conversation has since
// been reset.
func (g *Gateway) SeedNotes(ctx context.Context, s sessions.Session, in adapters.Inbound) (bool, error) {
	notes, err := g.opts.Store.RecentNotes(ctx, in.Adapter, in.ChatID, time.Now().Add(-seedWindow), seedNotes)
	if err != nil {
		return false, err
	}
	for i, n := range notes {
		if err := g.addNote(ctx, s.ID, n); err != nil {
			return i > 0, err
		}
	}
	return len(notes) > 0, nil
}

// addNote adds a note's message to a session, as something the bot said,
// once: its id is made of the note's and the session's.
func (g *Gateway) addNote(ctx context.Context, id sessions.ID, n Note) error {
	mid := uuid.NewSHA1(noteSpace, []byte(string(id)+"\x00"+n.Key)).String()
	if _, err := g.opts.Sessions.Append(ctx, id, sessions.Message{ID: sessions.MessageID(mid), Role: sessions.RoleAssistant, Content: n.Text}); err != nil {
		return fmt.Errorf("add a note to session %s: %w", id, err)
	}
	return nil
}

// noteFileText is what a chat's conversation keeps of a file a note sent.
func noteFileText(name, caption string) string {
	return strings.TrimSpace(fmt.Sprintf("[Sent the file %s] %s", name, caption))
}
