package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
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
		db := open(t)
		s := gateway.NewStore(db, clock.Now)
		// restarted is the store of the next process life: what it takes
		// is what the previous one left unanswered.
		restarted := func() *gateway.Store {
			clock.Advance(time.Millisecond)
			return gateway.NewStore(db, clock.Now)
		}

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

		t.Run("the record of a message by its channel's id", func(t *testing.T) {
			in := inbound("m-of")
			id, _, err := s.Accept(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.InboundOf(ctx, in.Adapter, in.ChatID, in.MessageID)
			if err != nil || r.ID != id || r.Status != gateway.InboundAccepted || r.SessionID != "" || r.Error != "" {
				t.Fatalf("accepted: %+v %v", r, err)
			}
			if err := s.Complete(ctx, []string{id}, gateway.InboundFailed, "", "ref x: the model is down", nil); err != nil {
				t.Fatal(err)
			}
			if r, err := s.InboundOf(ctx, in.Adapter, in.ChatID, in.MessageID); err != nil || r.Status != gateway.InboundFailed || r.Error != "ref x: the model is down" {
				t.Fatalf("failed: %+v %v", r, err)
			}
			if _, err := s.InboundOf(ctx, in.Adapter, "other-chat", in.MessageID); !errors.Is(err, gateway.ErrNotFound) {
				t.Fatalf("another chat's: %v", err)
			}
		})

		t.Run("unfinished and finish", func(t *testing.T) {
			id2, _, err := s.Accept(ctx, inbound("m2"))
			if err != nil {
				t.Fatal(err)
			}
			if un, _ := s.Unfinished(ctx, 100, true); len(un) != 0 {
				t.Fatalf("a store took back messages it accepted itself: %d", len(un))
			}
			un, err := restarted().Unfinished(ctx, 100, true)
			if err != nil || len(un) != 3 {
				t.Fatalf("unfinished: %d %v", len(un), err)
			}
			if un[0].Inbound.Text != "hello m1" || !un[0].Inbound.Time.Equal(time.UnixMilli(1700000000000)) {
				t.Fatalf("payload round trip: %+v", un[0].Inbound)
			}
			for _, u := range un {
				if u.ID != id2 {
					if err := s.Complete(ctx, []string{u.ID}, gateway.InboundDone, "", "", nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			un, _ = restarted().Unfinished(ctx, 100, true)
			if len(un) != 1 || un[0].ID != id2 {
				t.Fatalf("after finishing: %+v", un)
			}
			if err := s.Complete(ctx, []string{"0190c7a0-0000-7000-8000-000000000000"}, gateway.InboundDone, "", "", nil); !errors.Is(err, gateway.ErrNotFound) {
				t.Fatalf("finish unknown: %v", err)
			}
		})

		t.Run("outbox", func(t *testing.T) {
			keys := func(rs []gateway.Reply) []string {
				var out []string
				for _, r := range rs {
					out = append(out, r.Key)
				}
				return out
			}
			due := func(want ...string) []gateway.Reply {
				t.Helper()
				rs, err := s.DueReplies(ctx, 10)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(keys(rs)) != fmt.Sprint(want) {
					t.Fatalf("due %v, want %v", keys(rs), want)
				}
				return rs
			}
			claim := func(want ...string) []gateway.Reply {
				t.Helper()
				rs, err := s.ClaimDue(ctx, 10, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(keys(rs)) != fmt.Sprint(want) {
					t.Fatalf("claimed %v, want %v", keys(rs), want)
				}
				return rs
			}
			replies := []gateway.Reply{
				{Key: "A:0", Adapter: "tg", ChatID: "42", Text: "part one"},
				{Key: "A:1", Adapter: "tg", ChatID: "42", Text: "part two"},
				{Key: "B:0", Adapter: "tg", ChatID: "43", Text: "other chat"},
			}
			for range 2 { // the second time is a retry after a crash: nothing new
				if err := s.QueueReplies(ctx, replies); err != nil {
					t.Fatal(err)
				}
			}
			// Only each chat's oldest reply is due.
			rs := due("A:0", "B:0")
			a0, b0 := rs[0], rs[1]
			if a0.Text != "part one" || a0.Adapter != "tg" || a0.ChatID != "42" || a0.Attempts != 0 {
				t.Fatalf("row round trip: %+v", a0)
			}
			// A claim takes every due reply once; a second sender gets none.
			claim("A:0", "B:0")
			claim()
			due() // A:1 waits behind A:0, which is out for sending
			if err := s.MarkSent(ctx, a0.ID, "tg-100"); err != nil {
				t.Fatal(err)
			}
			a1 := due("A:1")[0]
			// B:0 failed; it is due again after its backoff, with the attempt counted.
			if err := s.MarkRetry(ctx, b0.ID, fmt.Errorf("429"), clock.Now().Add(time.Second), false); err != nil {
				t.Fatal(err)
			}
			due("A:1")
			clock.Advance(time.Second)
			if rs := due("A:1", "B:0"); rs[1].Attempts != 1 {
				t.Fatalf("attempts after one failure: %d", rs[1].Attempts)
			}
			// A sender that dies mid-send leaves its lease to lapse.
			if a1.Key != "A:1" {
				t.Fatalf("a1 = %s", a1.Key)
			}
			claim("A:1", "B:0")
			due()
			clock.Advance(2 * time.Minute)
			if rs := due("A:1", "B:0"); rs[0].Attempts != 1 || rs[1].Attempts != 2 {
				t.Fatalf("attempts after a lapsed lease: %d, %d", rs[0].Attempts, rs[1].Attempts)
			}
			if err := s.MarkRetry(ctx, a1.ID, fmt.Errorf("400 bad request"), clock.Now(), true); err != nil {
				t.Fatal(err)
			}
			due("B:0") // given up
		})
	})
}

func TestCompleteFinishesAndQueuesTogether(t *testing.T) {
	ctx := context.Background()
	s := gateway.NewStore(dbtest.SQLite(t), nil)
	id, _, err := s.Accept(ctx, inbound("c1"))
	if err != nil {
		t.Fatal(err)
	}
	// A reply to a session that does not exist breaks the foreign key: the
	// whole completion rolls back, and the message still counts as unanswered.
	err = s.Complete(ctx, []string{id}, gateway.InboundDone, "", "", []gateway.Reply{
		{Key: "c1:0", SessionID: "0190c7a0-0000-7000-8000-0000000000ff", Adapter: "tg", ChatID: "42", Text: "hi"}})
	if err == nil {
		t.Fatal("a reply to a missing session was queued")
	}
	if n, _ := s.Unanswered(ctx); n != 1 {
		t.Fatalf("a failed completion finished the message anyway: %d unanswered", n)
	}
	if err := s.Complete(ctx, []string{id}, gateway.InboundDone, "", "", []gateway.Reply{{Key: "c1:0", Adapter: "tg", ChatID: "42", Text: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Unanswered(ctx); n != 0 {
		t.Fatalf("%d unanswered after completing", n)
	}
	if due, _ := s.DueReplies(ctx, 10); len(due) != 1 || due[0].Text != "hi" {
		t.Fatalf("due after completing: %+v", due)
	}
}

// Replicas sharing PostgreSQL: each owns what it accepted while it renews
// the lease; a restarting replica takes its own back at once; another takes
// them only once the lease lapses; and a message is answered once.
func TestReplicasShareUnansweredMessagesByLease(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Postgres(t)
	clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	a := gateway.NewStore(db, clock.Now, gateway.Owner("replica-a"))
	b := gateway.NewStore(db, clock.Now, gateway.Owner("replica-b"))
	take := func(s *gateway.Store, starting bool) []string {
		t.Helper()
		un, err := s.Unfinished(ctx, 10, starting)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, u := range un {
			ids = append(ids, u.ID)
		}
		return ids
	}
	id, _, err := a.Accept(ctx, inbound("m1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := take(b, false); len(got) != 0 {
		t.Fatalf("b took a live message of a: %v", got)
	}
	if got := take(b, true); len(got) != 0 {
		t.Fatalf("b, starting, took a live message of a: %v", got)
	}
	clock.Advance(time.Millisecond)
	a = gateway.NewStore(db, clock.Now, gateway.Owner("replica-a")) // a restarts
	if got := take(a, true); len(got) != 1 || got[0] != id {
		t.Fatalf("a, restarting, took %v; want its own %s", got, id)
	}
	// a renews while it answers: the lease outlives the first minute.
	clock.Advance(30 * time.Second)
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(45 * time.Second)
	if got := take(b, false); len(got) != 0 {
		t.Fatalf("b took a message whose lease a renewed: %v", got)
	}
	// a dies: no more renewals, and the lease lapses.
	clock.Advance(time.Minute)
	if got := take(b, false); len(got) != 1 || got[0] != id {
		t.Fatalf("b took %v after a's lease lapsed; want %s", got, id)
	}
	if got := take(a, false); len(got) != 0 {
		t.Fatalf("a took back a message b now holds: %v", got)
	}
	// b answers; a late answer from a is refused, so one reply goes out.
	if err := b.Complete(ctx, []string{id}, gateway.InboundDone, "", "", []gateway.Reply{{Key: id + ":0", Adapter: "tg", ChatID: "42", Text: "from b"}}); err != nil {
		t.Fatal(err)
	}
	err = a.Complete(ctx, []string{id}, gateway.InboundDone, "", "", []gateway.Reply{{Key: id + ":a", Adapter: "tg", ChatID: "42", Text: "from a"}})
	if !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("a second answer was accepted: %v", err)
	}
	if due, _ := b.DueReplies(ctx, 10); len(due) != 1 || due[0].Text != "from b" {
		t.Fatalf("outbox: %+v", due)
	}
}

// On SQLite one daemon owns the file, so a start takes every unanswered
// message whoever accepted it.
func TestSQLiteStartTakesEveryUnansweredMessage(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	old := gateway.NewStore(db, nil, gateway.Owner("old-host"))
	if _, _, err := old.Accept(ctx, inbound("m1")); err != nil {
		t.Fatal(err)
	}
	un, err := gateway.NewStore(db, nil, gateway.Owner("new-host")).Unfinished(ctx, 10, true)
	if err != nil || len(un) != 1 {
		t.Fatalf("took %d (%v), want 1", len(un), err)
	}
}

// Recovery pages through any number of unanswered messages, each once.
func TestUnfinishedPages(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	before := gateway.NewStore(db, clock.Now)
	for i := range 7 {
		if _, _, err := before.Accept(ctx, inbound(fmt.Sprint("p", i))); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Second)
	s := gateway.NewStore(db, clock.Now)
	seen := map[string]bool{}
	var last []gateway.AcceptedInbound
	for {
		un, err := s.Unfinished(ctx, 3, true, last...)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range un {
			if seen[u.ID] {
				t.Fatalf("%s taken twice", u.ID)
			}
			seen[u.ID] = true
		}
		if len(un) < 3 {
			break
		}
		last = un[len(un)-1:]
	}
	if len(seen) != 7 {
		t.Fatalf("took %d of 7", len(seen))
	}
}

// Senders on several replicas claim at once: every reply goes out exactly
// once, and a chat's replies in the order they were queued.
func TestConcurrentClaimsSendEachReplyOnceInOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		const chats, perChat = 12, 8
		var replies []gateway.Reply
		for i := range perChat {
			for c := range chats {
				replies = append(replies, gateway.Reply{Key: fmt.Sprintf("c%d:%d", c, i), Adapter: "tg",
					ChatID: fmt.Sprint(c), Text: fmt.Sprintf("reply %d", i)})
			}
		}
		if err := gateway.NewStore(db, nil).QueueReplies(ctx, replies); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		sent := map[string][]string{} // chat: keys in the order sent
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := gateway.NewStore(db, nil, gateway.Owner(fmt.Sprint("replica-", w)))
				for idle := 0; idle < 20; {
					rs, err := s.ClaimDue(ctx, 5, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if len(rs) == 0 {
						idle++
						time.Sleep(time.Millisecond)
						continue
					}
					idle = 0
					for _, r := range rs {
						mu.Lock()
						sent[r.ChatID] = append(sent[r.ChatID], r.Key)
						mu.Unlock()
						if err := s.MarkSent(ctx, r.ID, "p-"+r.Key); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		for c := range chats {
			var want []string
			for i := range perChat {
				want = append(want, fmt.Sprintf("c%d:%d", c, i))
			}
			if got := sent[fmt.Sprint(c)]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("chat %d was sent %v; want %v", c, got, want)
			}
		}
	})
}

// The notes to a chat are the replies queued with no inbound message,
// whole, newest last: not replies to messages, not the gateway's pairing
// approvals, not those given up on, not those before the window.
func TestRecentNotes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		s := gateway.NewStore(open(t), clock.Now)
		queue := func(rs ...gateway.Reply) {
			t.Helper()
			if err := s.QueueReplies(ctx, rs); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Minute)
		}
		// sendNext sends chat 42's oldest pending reply, or gives up on it.
		sendNext := func(giveUp bool) {
			t.Helper()
			due, err := s.ClaimDue(ctx, 10, time.Minute)
			if err != nil || len(due) != 1 {
				t.Fatalf("claimed %d replies (%v), want chat 42's one", len(due), err)
			}
			if giveUp {
				err = s.MarkRetry(ctx, due[0].ID, errors.New("403"), clock.Now(), true)
			} else {
				err = s.MarkSent(ctx, due[0].ID, "p1")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		queue(gateway.Reply{Key: "notify:old:0", Adapter: "tg", ChatID: "42", Text: "before the window"})
		sendNext(false)
		since := clock.Now()
		queue(gateway.Reply{Key: "notify:ci:0:0", Adapter: "tg", ChatID: "42", Text: "given up on"})
		sendNext(true)
		queue(gateway.Reply{Key: "cron:r1:tg:42:0", Adapter: "tg", ChatID: "42", Text: "part one"},
			gateway.Reply{Key: "cron:r1:tg:42:1", Adapter: "tg", ChatID: "42", Text: "part two"})
		queue(gateway.Reply{Key: "notify:ci:1:0", Adapter: "tg", ChatID: "42", Text: "build failed"})
		queue(gateway.Reply{Key: "notify:ci:2:0", Adapter: "tg", ChatID: "43", Text: "another chat"})
		queue(gateway.Reply{Key: "notify:ci:3:0", Adapter: "dc", ChatID: "42", Text: "another channel"})
		queue(gateway.Reply{Key: "pairing:ABCD1234", Adapter: "tg", ChatID: "42", Text: "You're approved"})
		id, _, err := s.Accept(ctx, inbound("m1"))
		if err != nil {
			t.Fatal(err)
		}
		queue(gateway.Reply{Key: id + ":0", InboundID: id, Adapter: "tg", ChatID: "42", Text: "a reply"})
		texts := func(limit int) string {
			t.Helper()
			notes, err := s.RecentNotes(ctx, "tg", "42", since, limit)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, n := range notes {
				out = append(out, n.Text)
			}
			return strings.Join(out, "|")
		}
		// A note's chunks are its messages, as the chat shows them.
		if got := texts(10); got != "part one|part two|build failed" {
			t.Errorf("notes, at most 10: %s", got)
		}
		if got := texts(1); got != "build failed" {
			t.Errorf("notes, at most 1: %s", got)
		}
		// A busy chat: the newest notes, not the first.
		for i := range 250 {
			queue(gateway.Reply{Key: fmt.Sprintf("cron:every5m:%d:0", i), Adapter: "tg", ChatID: "42", Text: fmt.Sprint("report ", i)})
		}
		if got := texts(3); got != "report 247|report 248|report 249" {
			t.Errorf("a busy chat's newest notes: %s", got)
		}
	})
}

// A sender whose lease lapsed, and whose attempt failed late, leaves a
// reply that another sender has sent meanwhile as sent.
func TestLateRetryLeavesASentReplySent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		s := gateway.NewStore(open(t), clock.Now)
		if err := s.QueueReplies(ctx, []gateway.Reply{{Key: "k:0", Adapter: "tg", ChatID: "42", Text: "hi"}}); err != nil {
			t.Fatal(err)
		}
		first, err := s.ClaimDue(ctx, 10, time.Minute)
		if err != nil || len(first) != 1 {
			t.Fatalf("first claim: %d (%v)", len(first), err)
		}
		clock.Advance(2 * time.Minute) // the first sender's lease lapses
		second, err := s.ClaimDue(ctx, 10, time.Minute)
		if err != nil || len(second) != 1 {
			t.Fatalf("second claim: %d (%v)", len(second), err)
		}
		if err := s.MarkSent(ctx, second[0].ID, "p-1"); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkRetry(ctx, first[0].ID, errors.New("timeout"), clock.Now(), false); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		if due, err := s.DueReplies(ctx, 10); err != nil || len(due) != 0 {
			t.Fatalf("after a late failed attempt, %d replies are due again (%v); want none", len(due), err)
		}
	})
}

// A process that restarts takes back at once the replies it claimed in its
// previous life, so its chats don't wait out the claim's lease, and a
// platform's backoff is kept. On PostgreSQL nothing is taken back until
// replicas have a heartbeat that proves the claimer dead.
func TestReclaimAfterRestart(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		db := open(t)
		before := gateway.NewStore(db, clock.Now, gateway.Owner("host-a"))
		replies := []gateway.Reply{
			{Key: "a:0", Adapter: "tg", ChatID: "1", Text: "claimed when the crash came"},
			{Key: "a:1", Adapter: "tg", ChatID: "1", Text: "waits behind it"},
			{Key: "b:0", Adapter: "tg", ChatID: "2", Text: "in backoff"},
		}
		if err := before.QueueReplies(ctx, replies); err != nil {
			t.Fatal(err)
		}
		claimed, err := before.ClaimDue(ctx, 10, time.Minute)
		if err != nil || len(claimed) != 2 {
			t.Fatalf("claim: %d (%v)", len(claimed), err)
		}
		// b:0 failed with a retry-after of 30 s, then the process died with
		// a:0 out for sending.
		var b0 gateway.Reply
		for _, r := range claimed {
			if r.Key == "b:0" {
				b0 = r
			}
		}
		if err := before.MarkRetry(ctx, b0.ID, errors.New("429"), clock.Now().Add(30*time.Second), false); err != nil {
			t.Fatal(err)
		}

		after := gateway.NewStore(db, clock.Now, gateway.Owner("host-a"))
		if before.Shared() {
			// Another live process may share the replica id: without a
			// heartbeat to prove the claimer dead, nothing is taken back.
			if n, err := after.Reclaim(ctx); err != nil || n != 0 {
				t.Fatalf("took back %d claims on PostgreSQL (%v); want 0", n, err)
			}
			return
		}
		n, err := after.Reclaim(ctx)
		if err != nil || n != 1 {
			t.Fatalf("reclaimed %d (%v); want 1", n, err)
		}
		due, err := after.DueReplies(ctx, 10)
		if err != nil || len(due) != 1 || due[0].Key != "a:0" {
			t.Fatalf("due at once after the restart: %v (%v); want a:0 only (b:0 keeps its backoff)", due, err)
		}
		if n, err := after.Reclaim(ctx); err != nil || n != 0 {
			t.Fatalf("a second reclaim took %d (%v); want 0", n, err)
		}
		clock.Advance(30 * time.Second)
		due, err = after.DueReplies(ctx, 10)
		if err != nil || len(due) != 2 {
			t.Fatalf("due once the backoff passed: %v (%v); want a:0 and b:0", due, err)
		}
	})
}

// Recovery re-runs a session's unanswered messages in the order its lane
// would have run them: the interrupted turn (whose user message is stored)
// first, even when a message accepted a moment earlier was queued behind
// it, then the rest in accept order; and it pages through that order.
func TestUnfinishedInLaneOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		before := gateway.NewStore(db, clock.Now)
		ids := map[string]string{}
		for _, m := range []string{"early", "interrupted", "later1", "later2"} {
			id, _, err := before.Accept(ctx, inbound(m)) // all in the same millisecond
			if err != nil {
				t.Fatal(err)
			}
			ids[m] = id
		}
		// The lane ran "interrupted" first (its accept committed first):
		// its user message is stored, and the crash came during its turn.
		st := sessions.NewStore(db)
		sess, _, err := st.Resolve(ctx, sessions.ChatKey("telegram", "42", "7", "main"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, sess.ID, sessions.Message{ID: sessions.MessageID(ids["interrupted"]), Role: sessions.RoleUser, Content: "hello interrupted"}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		for _, page := range []int{10, 1} {
			after := gateway.NewStore(db, clock.Now)
			var got []string
			var last []gateway.AcceptedInbound
			for {
				un, err := after.Unfinished(ctx, page, true, last...)
				if err != nil {
					t.Fatal(err)
				}
				for _, u := range un {
					got = append(got, u.Inbound.MessageID)
					if u.Inbound.MessageID == "interrupted" && u.SessionID != string(sess.ID) {
						t.Errorf("the interrupted message's session: %q, want %s", u.SessionID, sess.ID)
					}
				}
				if len(un) < page {
					break
				}
				last = un[len(un)-1:]
			}
			if got[0] != "interrupted" || len(got) != 4 {
				t.Fatalf("page size %d: recovery order %v; want the interrupted turn first, then the rest", page, got)
			}
			if fmt.Sprint(got[1:]) != fmt.Sprint([]string{"early", "later1", "later2"}) {
				t.Fatalf("page size %d: recovery order %v; want the rest in accept order", page, got)
			}
			clock.Advance(time.Millisecond)
		}
	})
}

// On a SQLite file this process holds, a store whose outbox has never held
// a note answers RecentNotes with no read after the first, and reads again
// from the moment one is queued: a note is never missed. Neither a file
// that isn't held (another process may queue notes) nor a store opened on
// an outbox that already holds one skips the read.
func TestRecentNotesSkipsTheReadWhileThereAreNone(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	var reads atomic.Int64
	db.Observe(func(op dbutil.Op, _ time.Time, _ time.Duration) {
		if op == dbutil.OpRead {
			reads.Add(1)
		}
	})
	since := time.Now().Add(-time.Hour)
	notesIn := func(s *gateway.Store, chat string) (n int, viewed int64) {
		t.Helper()
		before := reads.Load()
		notes, err := s.RecentNotes(ctx, "tg", chat, since, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(notes), reads.Load() - before
	}

	// Not held: every call reads.
	loose := gateway.NewStore(db, nil)
	for range 2 {
		if n, viewed := notesIn(loose, "1"); n != 0 || viewed != 1 {
			t.Fatalf("on a file not held: %d notes in %d reads, want 0 in 1", n, viewed)
		}
	}

	db.HoldsFile()
	s := gateway.NewStore(db, nil)
	if n, viewed := notesIn(s, "1"); n != 0 || viewed != 1 {
		t.Fatalf("first call: %d notes in %d reads, want 0 in 1", n, viewed)
	}
	for _, chat := range []string{"1", "2", "3"} {
		if n, viewed := notesIn(s, chat); n != 0 || viewed != 0 {
			t.Fatalf("chat %s, no note ever queued: %d notes in %d reads, want none and no read", chat, n, viewed)
		}
	}
	// A reply to a message is not a note: still no read.
	id, _, err := s.Accept(ctx, inbound("m1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, []string{id}, gateway.InboundDone, "", "", []gateway.Reply{{Key: "r:" + id, InboundID: id, Adapter: "tg", ChatID: "1", Text: "an answer"}}); err != nil {
		t.Fatal(err)
	}
	if n, viewed := notesIn(s, "1"); n != 0 || viewed != 0 {
		t.Fatalf("after a reply: %d notes in %d reads, want none and no read", n, viewed)
	}
	// A note: found at once.
	if err := s.QueueReplies(ctx, []gateway.Reply{{Key: "cron:r1:tg:2:0", Adapter: "tg", ChatID: "2", Text: "the nightly report"}}); err != nil {
		t.Fatal(err)
	}
	if n, viewed := notesIn(s, "2"); n != 1 || viewed != 1 {
		t.Fatalf("after a note: %d notes in %d reads, want 1 in 1", n, viewed)
	}
	if n, viewed := notesIn(s, "1"); n != 0 || viewed != 1 {
		t.Fatalf("another chat after a note: %d notes in %d reads, want 0 in 1", n, viewed)
	}
	// A new store on an outbox that holds a note reads it.
	again := gateway.NewStore(db, nil)
	for range 2 {
		if n, viewed := notesIn(again, "2"); n != 1 || viewed != 1 {
			t.Fatalf("a new store on an outbox with a note: %d notes in %d reads, want 1 in 1", n, viewed)
		}
	}
}

// A note queued while RecentNotes finds none is never hidden by it: the
// note's store of "some" wins over the read's "none", in either order.
func TestRecentNotesRacingANote(t *testing.T) {
	ctx := context.Background()
	for i := range 20 {
		db := dbtest.SQLite(t)
		db.HoldsFile()
		s := gateway.NewStore(db, nil)
		done := make(chan error, 1)
		go func() {
			done <- s.QueueReplies(ctx, []gateway.Reply{{Key: fmt.Sprintf("cron:r%d:tg:9:0", i), Adapter: "tg", ChatID: "9", Text: "report"}})
		}()
		if _, err := s.RecentNotes(ctx, "tg", "9", time.Now().Add(-time.Hour), 10); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		notes, err := s.RecentNotes(ctx, "tg", "9", time.Now().Add(-time.Hour), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(notes) != 1 {
			t.Fatalf("run %d: %d notes after the note was queued, want 1", i, len(notes))
		}
	}
}
