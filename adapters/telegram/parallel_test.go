package telegram

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	tt "github.com/parleyd/parley/adapters/telegram/telegramtest"
)

// gateSink holds each delivery until want of them are in flight at once (or
// a while has passed), and records the most it saw at once.
type gateSink struct {
	mu              sync.Mutex
	in, most, taken int
	want            int
	all, doneAll    chan struct{}
}

func (g *gateSink) Deliver(ctx context.Context, _ adapters.Inbound) error {
	g.mu.Lock()
	g.in++
	g.most = max(g.most, g.in)
	if g.in == g.want {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(2 * time.Second): // fewer at once: let them through
	case <-ctx.Done():
		return ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.in--
	if g.taken++; g.taken == g.want {
		close(g.doneAll)
	}
	return nil
}

// A getUpdates batch's chats are all delivered at once, so the batch's
// messages share the database's group commits instead of waiting for one
// commit per few chats.
func TestABatchsChatsAreDeliveredAtOnce(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	h := newHarness(t, srv, testToken, "poll_timeout: 1")
	ctx := testContext(t)
	const chats = batchLimit
	for c := range chats {
		srv.Inject(textUpdate(int64(1000+c), 1, "hello"))
	}
	g := &gateSink{want: chats, all: make(chan struct{}), doneAll: make(chan struct{})}
	stop := h.start(g)
	defer stop()
	select {
	case <-g.doneAll:
	case <-ctx.Done():
		t.Fatal("the batch was never taken")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.most != chats {
		t.Fatalf("at most %d of a batch's %d chats were delivered at once, want all", g.most, chats)
	}
}
