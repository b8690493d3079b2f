// Package adapterstest provides a recording adapter for tests of the code
// that sends through adapters.
package adapterstest

import (
	"context"
	"fmt"
	"sync"

	"github.com/parleyd/parley/adapters"
)

// Recorder is an adapter that keeps what it is asked to send. Its Start
// hands the sink to the test (see Inject), and it fails sends on request.
type Recorder struct {
	// Limit is reported as MaxMessageLength; 0 means no limit.
	Limit int

	mu      sync.Mutex
	cond    *sync.Cond
	sent    []adapters.Outbound
	ids     []string // the platform id of each sent message
	edits   []Edit
	typing  []string
	sink    adapters.Sink
	failN   int
	failErr error
	nextID  int
}

// Edit is one recorded edit.
type Edit struct {
	ChatID, MessageID, Text string
}

var (
	_ adapters.Adapter = (*Recorder)(nil)
	_ adapters.Limiter = (*Recorder)(nil)
	_ adapters.Editor  = (*Recorder)(nil)
	_ adapters.Typer   = (*Recorder)(nil)
)

// New returns an empty recorder.
func New() *Recorder {
	r := &Recorder{}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// Start keeps the sink for Inject and waits for ctx to end.
func (r *Recorder) Start(ctx context.Context, sink adapters.Sink) error {
	r.mu.Lock()
	r.sink = sink
	r.cond.Broadcast()
	r.mu.Unlock()
	<-ctx.Done()
	return nil
}

// Inject delivers in through the sink Start was given, as a platform would.
func (r *Recorder) Inject(ctx context.Context, in adapters.Inbound) error {
	r.mu.Lock()
	sink := r.sink
	r.mu.Unlock()
	if sink == nil {
		return fmt.Errorf("recorder: Inject before Start")
	}
	return sink.Deliver(ctx, in)
}

// FailNext makes the next n sends fail with err.
func (r *Recorder) FailNext(n int, err error) {
	r.mu.Lock()
	r.failN, r.failErr = n, err
	r.mu.Unlock()
}

// Send records out and returns a new platform message id.
func (r *Recorder) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	if err := ctx.Err(); err != nil {
		return adapters.Sent{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failN > 0 {
		r.failN--
		return adapters.Sent{}, r.failErr
	}
	r.sent = append(r.sent, out)
	r.nextID++
	id := fmt.Sprintf("rec-%d", r.nextID)
	r.ids = append(r.ids, id)
	r.cond.Broadcast()
	return adapters.Sent{MessageID: id}, nil
}

// MaxMessageLength implements adapters.Limiter.
func (r *Recorder) MaxMessageLength() int { return r.Limit }

// Edit implements adapters.Editor.
func (r *Recorder) Edit(ctx context.Context, chatID, messageID, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.edits = append(r.edits, Edit{chatID, messageID, text})
	r.cond.Broadcast()
	return nil
}

// Visible is what a person sees in a chat: the texts of the messages sent
// there, in order, each as last edited.
func (r *Recorder) Visible(chatID string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	text := map[string]string{}
	var order []string
	for i, o := range r.sent {
		if o.ChatID == chatID {
			text[r.ids[i]] = o.Text
			order = append(order, r.ids[i])
		}
	}
	for _, e := range r.edits {
		if _, ok := text[e.MessageID]; ok && e.ChatID == chatID {
			text[e.MessageID] = e.Text
		}
	}
	out := make([]string, len(order))
	for i, id := range order {
		out[i] = text[id]
	}
	return out
}

// WaitEdits waits until at least n edits are recorded.
func (r *Recorder) WaitEdits(ctx context.Context, n int) ([]Edit, error) {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.edits) < n {
		if ctx.Err() != nil {
			return append([]Edit(nil), r.edits...), fmt.Errorf("recorder: %d edits, want %d: %w", len(r.edits), n, ctx.Err())
		}
		r.cond.Wait()
	}
	return append([]Edit(nil), r.edits...), nil
}

// Typing implements adapters.Typer.
func (r *Recorder) Typing(ctx context.Context, chatID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.typing = append(r.typing, chatID)
	return nil
}

// Sent returns a copy of everything sent so far.
func (r *Recorder) Sent() []adapters.Outbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]adapters.Outbound(nil), r.sent...)
}

// Typings returns the chats a typing indicator was shown in, in order.
func (r *Recorder) Typings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.typing...)
}

// Edits returns a copy of every edit so far.
func (r *Recorder) Edits() []Edit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Edit(nil), r.edits...)
}

// WaitSent waits until at least n messages were sent or ctx ends, and
// returns what was sent.
func (r *Recorder) WaitSent(ctx context.Context, n int) ([]adapters.Outbound, error) {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.sent) < n {
		if err := ctx.Err(); err != nil {
			return append([]adapters.Outbound(nil), r.sent...), fmt.Errorf("recorder: %d of %d messages sent: %w", len(r.sent), n, err)
		}
		r.cond.Wait()
	}
	return append([]adapters.Outbound(nil), r.sent...), nil
}
