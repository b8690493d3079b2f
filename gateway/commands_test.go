package gateway_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/parleyd/parley/commands"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
)

// Every command in the table, by its name and each alias, is answered by
// the gateway itself in a chat, never run as a turn; /help's answer is the
// table's help.
func TestEveryCommandIsHandled(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		var turns atomic.Int64
		r := newRig(t, open(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
			turns.Add(1)
			return echoRun(ctx, in)
		}, nil)
		n := 0
		for _, c := range commands.All {
			for _, name := range append([]string{c.Name}, c.Aliases...) {
				n++
				in := msg("1", "/"+name)
				in.ChatID = "chat-" + name // a chat of its own: /reset would end another's session
				r.deliver(in)
				got := r.sent(n)[n-1]
				switch {
				case got == "/"+c.Name+" is not available here.":
					t.Errorf("/%s has no handler in the gateway", name)
				case got == "" || got == "echo: /"+name:
					t.Errorf("/%s was answered %q, not by the command", name, got)
				case c.Name == "help" && got != commands.Help():
					t.Errorf("/help answered %q, not the table's help", got)
				}
			}
		}
		if turns.Load() != 0 {
			t.Fatalf("%d commands ran as turns", turns.Load())
		}
	})
}
