package gateway_test

import (
	"context"
	"errors"
	"testing"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// A turn that stores its reply through TurnInput.Finish records its
// outcome in the same transaction: once the reply is stored, its message
// is answered and the reply waits in the outbox, before the turn returns;
// the gateway writes nothing more, and the reply goes out once.
func TestTurnOutcomeCommitsWithTheReply(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		var r *rig
		checked := make(chan error, 1)
		r = newRig(t, open(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
			if in.Finish == nil {
				return "", errors.New("no Finish offered for a reply that doesn't stream")
			}
			const reply = "stored with its outcome"
			_, err := r.sess.AppendWith(ctx, in.Session.ID, sessions.Message{Role: sessions.RoleAssistant, Content: reply},
				func(ctx context.Context, q dbutil.Querier, _ sessions.Message) error { return in.Finish(ctx, q, reply) })
			if err != nil {
				return "", err
			}
			// Committed with the reply: answered, and its reply queued.
			status, serr := r.store.Status(ctx, in.IDs[0])
			// Pending, whether or not the sender has claimed it yet (a claim
			// takes it out of DueReplies before it is sent).
			due, derr := r.store.Unsent(ctx, "pending", 10)
			switch {
			case serr != nil || derr != nil:
				checked <- errors.Join(serr, derr)
			case status != gateway.InboundDone:
				checked <- errors.New("the message is " + string(status) + " once its reply is stored, want done")
			case len(due) == 0 && len(r.rec.Sent()) == 0:
				checked <- errors.New("the reply is stored but not queued")
			default:
				checked <- nil
			}
			return reply, nil
		}, nil)
		r.deliver(msg("1", "hello"))
		if got := r.sent(1); got[0] != "stored with its outcome" {
			t.Fatalf("replies %q", got)
		}
		if err := <-checked; err != nil {
			t.Fatal(err)
		}
		waitUnfinished(t, r.store, 0)
		if n := len(r.rec.Sent()); n != 1 {
			t.Fatalf("%d sends, want 1", n)
		}
	})
}

// A streamed reply's final edit is known only once the stream ends, after
// the reply is stored: no Finish is offered, and the gateway records the
// outcome itself.
func TestStreamedTurnRecordsItsOutcomeAfterwards(t *testing.T) {
	r := newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
		if in.Finish != nil {
			return "", errors.New("Finish offered for a streamed reply")
		}
		return "streamed", nil
	}, nil)
	in := msg("1", "hello")
	in.Adapter = "tg-stream"
	r.deliver(in)
	if got := r.sent(1); got[0] != "streamed" {
		t.Fatalf("replies %q", got)
	}
	waitUnfinished(t, r.store, 0)
}
