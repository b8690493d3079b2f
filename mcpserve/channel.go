package mcpserve

import (
	"context"

	"github.com/parleyd/parley/adapters"
)

// Channel is the "mcp" channel. send_message hands its messages to the
// gateway itself and takes the turn's reply from the event bus, so the
// channel has nothing to receive, and a reply the outbox sends it is
// already where the client reads it (the session).
type Channel struct{}

var (
	_ adapters.Adapter  = Channel{}
	_ adapters.Declarer = Channel{}
)

// Start waits for the end: nothing arrives on this channel by itself.
func (Channel) Start(ctx context.Context, _ adapters.Sink) error {
	<-ctx.Done()
	return nil
}

// Send takes a reply as sent: send_message returned it already.
func (Channel) Send(_ context.Context, out adapters.Outbound) (adapters.Sent, error) {
	return adapters.Sent{MessageID: out.IdempotencyKey}, nil
}

// Source declares the channel: send_message's caller reads the reply, so
// nothing is queued, and nobody answers a tool's permission question
// mid-turn (a call that needs one is denied, saying so).
func (Channel) Source() adapters.Source {
	return adapters.Source{Replies: adapters.RepliesToCaller, Asks: adapters.AskNobody}
}
