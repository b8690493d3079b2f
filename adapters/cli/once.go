package cli

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
)

// Once is the channel of `parley ask`: it sends one message, in a session
// of its own (cli:run:<time>), and stops once the reply has come.
type Once struct {
	id    adapters.ID
	text  string
	user  string
	chat  string
	mu    sync.Mutex
	reply strings.Builder
	got   chan struct{}
	once  sync.Once
}

var (
	_ adapters.Adapter  = (*Once)(nil)
	_ adapters.Declarer = (*Once)(nil)
)

// Source declares the channel: its reply comes through Send, as a chat's,
// and nobody answers questions mid-turn.
func (o *Once) Source() adapters.Source {
	return adapters.Source{Replies: adapters.RepliesToChat, Asks: adapters.AskNobody}
}

// NewOnce returns a channel that asks text once, as user.
func NewOnce(id adapters.ID, text, user string) *Once {
	if user == "" {
		user = "local"
	}
	return &Once{id: id, text: text, user: user, got: make(chan struct{}),
		chat: "run:" + time.Now().UTC().Format("20060102T150405.000Z")}
}

// ChatID is the chat, and so the session, the question is asked in.
func (o *Once) ChatID() string { return o.chat }

// Start delivers the question and returns once the reply has come (or ctx
// ends), which stops the daemon running it.
func (o *Once) Start(ctx context.Context, sink adapters.Sink) error {
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	in := adapters.Inbound{Adapter: o.id, Surface: Surface, ChatID: o.chat, UserID: o.user,
		DisplayName: o.user, MessageID: id.String(), Text: o.text, Time: time.Now()}
	if err := sink.Deliver(ctx, in); err != nil {
		return err
	}
	select {
	case <-o.got:
		return io.EOF
	case <-ctx.Done():
		return nil
	}
}

// Send keeps a reply; a long one comes in several parts.
func (o *Once) Send(_ context.Context, out adapters.Outbound) (adapters.Sent, error) {
	o.mu.Lock()
	if o.reply.Len() > 0 {
		o.reply.WriteString("\n")
	}
	o.reply.WriteString(out.Text)
	o.mu.Unlock()
	o.once.Do(func() { close(o.got) })
	return adapters.Sent{MessageID: out.IdempotencyKey}, nil
}

// Reply is the reply, every part of it.
func (o *Once) Reply() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reply.String()
}
