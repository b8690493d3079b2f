package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions/storetest"
)

func inbound(msgID string) adapters.Inbound {
	return adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "42", UserID: "7", MessageID: msgID,
		Text: "hello " + msgID, Time: time.UnixMilli(1700000000000).UTC()}
}

func TestStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		s := gateway.NewStore(open(t), clock.Now)

		t.Run("accept dedupes concurrent redeliveries", func(t *testing.T) {
			var accepted, dups atomic.Int32
			var wg sync.WaitGroup
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, dup, err := s.Accept(ctx, inbound("m1"))
					if err != nil {
						t.Error(err)
					} else if dup {
						dups.Add(1)
					} else {
						accepted.Add(1)
					}
				}()
			}
			wg.Wait()
			if accepted.Load() != 1 || dups.Load() != 19 {
				t.Fatalf("accepted %d, duplicates %d; want 1 and 19", accepted.Load(), dups.Load())
			}
			// The same message id in another chat is another message.
			other := inbound("m1")
			other.ChatID = "43"
			if _, dup, err := s.Accept(ctx, other); err != nil || dup {
				t.Fatalf("same id, other chat: dup=%v %v", dup, err)
			}
		})

		t.Run("unfinished and finish", func(t *testing.T) {
			id2, _, err := s.Accept(ctx, inbound("m2"))
			if err != nil {
				t.Fatal(err)
			}
			un, err := s.Unfinished(ctx, 100)
			if err != nil || len(un) != 3 {
				t.Fatalf("unfinished: %d %v", len(un), err)
			}
			if un[0].Inbound.Text != "hello m1" || !un[0].Inbound.Time.Equal(time.UnixMilli(1700000000000)) {
				t.Fatalf("payload round trip: %+v", un[0].Inbound)
			}
			for _, u := range un {
				if u.ID != id2 {
					if err := s.Finish(ctx, u.ID, gateway.InboundDone, "", ""); err != nil {
						t.Fatal(err)
					}
				}
			}
			un, _ = s.Unfinished(ctx, 100)
			if len(un) != 1 || un[0].ID != id2 {
				t.Fatalf("after finishing: %+v", un)
			}
			if err := s.Finish(ctx, "0190c7a0-0000-7000-8000-000000000000", gateway.InboundDone, "", ""); !errors.Is(err, gateway.ErrNotFound) {
				t.Fatalf("finish unknown: %v", err)
			}
		})

		t.Run("outbox", func(t *testing.T) {
			replies := []gateway.Reply{
				{Key: "msgA:0", Adapter: "tg", ChatID: "42", Text: "part one"},
				{Key: "msgA:1", Adapter: "tg", ChatID: "42", Text: "part two"},
			}
			if err := s.QueueReplies(ctx, replies); err != nil {
				t.Fatal(err)
			}
			if err := s.QueueReplies(ctx, replies); err != nil { // a retry after a crash
				t.Fatal(err)
			}
			due, err := s.DueReplies(ctx, 10)
			if err != nil || len(due) != 2 || due[0].Text != "part one" || due[1].Text != "part two" {
				t.Fatalf("due: %+v %v", due, err)
			}
			// Two senders race for each row; exactly one wins.
			for _, r := range due {
				wins := 0
				for range 2 {
					ok, err := s.Claim(ctx, r.ID, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						wins++
					}
				}
				if wins != 1 {
					t.Fatalf("reply %s claimed %d times", r.Key, wins)
				}
			}
			if due, _ := s.DueReplies(ctx, 10); len(due) != 0 {
				t.Fatalf("claimed replies still due: %d", len(due))
			}
			if err := s.MarkSent(ctx, failThenRetry(t, s, clock), "tg-100"); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// failThenRetry lets the lease on the first reply lapse, fails it once, and returns
// its id once it is due again.
func failThenRetry(t *testing.T, s *gateway.Store, clock *storetest.Clock) string {
	t.Helper()
	ctx := context.Background()
	clock.Advance(2 * time.Minute) // both leases lapse: a sender died mid-send
	due, err := s.DueReplies(ctx, 10)
	if err != nil || len(due) != 2 || due[0].Attempts != 1 {
		t.Fatalf("after the lease lapsed: %+v %v", due, err)
	}
	if ok, _ := s.Claim(ctx, due[1].ID, time.Minute); !ok {
		t.Fatal("claim second")
	}
	if err := s.MarkRetry(ctx, due[1].ID, fmt.Errorf("boom"), clock.Now(), true); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Claim(ctx, due[0].ID, time.Minute); !ok {
		t.Fatal("claim first")
	}
	if err := s.MarkRetry(ctx, due[0].ID, fmt.Errorf("429"), clock.Now().Add(time.Second), false); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.DueReplies(ctx, 10); len(d) != 0 {
		t.Fatalf("a failed reply is due: %+v", d)
	}
	clock.Advance(time.Second)
	d, _ := s.DueReplies(ctx, 10)
	if len(d) != 1 || d[0].ID != due[0].ID || d[0].Attempts != 2 {
		t.Fatalf("retry not due: %+v", d)
	}
	return d[0].ID
}
