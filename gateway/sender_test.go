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
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions/storetest"
)

func senderFor(store *gateway.Store, rec adapters.Adapter, opts gateway.SenderOptions) *gateway.Sender {
	opts.Adapter = func(id adapters.ID) (adapters.Adapter, bool) {
		if id == "tg" {
			return rec, true
		}
		return nil, false
	}
	if opts.Backoff == nil {
		opts.Backoff = func(int) time.Duration { return time.Second }
	}
	return gateway.NewSender(store, opts)
}

func sendAll(t *testing.T, s *gateway.Sender) int {
	t.Helper()
	total := 0
	for range 100 {
		n, err := s.SendDue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return total
		}
		total += n
	}
	t.Fatal("the outbox never drained")
	return 0
}

func TestSenderSendsOnceInOrder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		store := gateway.NewStore(open(t), clock.Now)
		rec := adapterstest.New()
		var replies []gateway.Reply
		for chat := range 3 {
			for i := range 4 {
				replies = append(replies, gateway.Reply{Key: fmt.Sprintf("m%d:%d", chat, i), Adapter: "tg", ChatID: fmt.Sprint(chat), Text: fmt.Sprintf("%d-%d", chat, i)})
			}
		}
		if err := store.QueueReplies(ctx, replies); err != nil {
			t.Fatal(err)
		}
		// Two replicas' senders drain the same outbox.
		a, b := senderFor(store, rec, gateway.SenderOptions{}), senderFor(store, rec, gateway.SenderOptions{})
		var wg sync.WaitGroup
		for _, s := range []*gateway.Sender{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); sendAll(t, s) }()
		}
		wg.Wait()
		sendAll(t, a)
		sent := rec.Sent()
		if len(sent) != len(replies) {
			t.Fatalf("%d sends for %d replies", len(sent), len(replies))
		}
		next := map[string]int{}
		for _, o := range sent {
			var chat, i int
			fmt.Sscanf(o.Text, "%d-%d", &chat, &i)
			if i != next[o.ChatID] || o.ChatID != fmt.Sprint(chat) {
				t.Fatalf("chat %s got part %d, expected %d: %v", o.ChatID, i, next[o.ChatID], sent)
			}
			next[o.ChatID]++
			if o.IdempotencyKey != fmt.Sprintf("m%d:%d", chat, i) {
				t.Fatalf("idempotency key %q", o.IdempotencyKey)
			}
		}
		if due, _ := store.DueReplies(ctx, 10); len(due) != 0 {
			t.Fatalf("%d replies still due after sending", len(due))
		}
	})
}

func TestSenderRetriesAndGivesUp(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	store := gateway.NewStore(dbtest.SQLite(t), clock.Now)
	rec := adapterstest.New()
	s := senderFor(store, rec, gateway.SenderOptions{MaxAttempts: 3})
	if err := store.QueueReplies(ctx, []gateway.Reply{
		{Key: "r:0", Adapter: "tg", ChatID: "1", Text: "rate limited first"},
		{Key: "x:0", Adapter: "gone", ChatID: "2", Text: "no such adapter"},
	}); err != nil {
		t.Fatal(err)
	}
	rec.FailNext(1, &adapters.RateLimitError{RetryAfter: 30 * time.Second})
	if n, _ := s.SendDue(ctx); n != 0 {
		t.Fatalf("sent %d on a 429", n)
	}
	clock.Advance(29 * time.Second) // the platform's retry_after, not our 1s backoff
	if n, _ := s.SendDue(ctx); n != 0 {
		t.Fatal("sent before retry_after passed")
	}
	clock.Advance(time.Second)
	if n, _ := s.SendDue(ctx); n != 1 {
		t.Fatalf("sent %d once retry_after passed", n)
	}
	// The unknown adapter's reply has now failed 3 times and is given up.
	if got := rec.Sent(); len(got) != 1 || got[0].Text != "rate limited first" {
		t.Fatalf("sent %v", got)
	}
	clock.Advance(time.Hour)
	if n, _ := s.SendDue(ctx); n != 0 {
		t.Fatal("a given-up reply was sent")
	}
	if due, _ := store.DueReplies(ctx, 10); len(due) != 0 {
		t.Fatalf("a given-up reply is still due: %+v", due)
	}
}

// A reply written before a crash is sent once after the restart.
func TestSenderAfterRestart(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	before := gateway.NewStore(db, clock.Now)
	if err := before.QueueReplies(ctx, []gateway.Reply{{Key: "k:0", Adapter: "tg", ChatID: "1", Text: "hello"}}); err != nil {
		t.Fatal(err)
	}
	// The first process claimed it and died before sending.
	if due, err := before.ClaimDue(ctx, 10, time.Minute); err != nil || len(due) != 1 {
		t.Fatalf("claim: %v %v", due, err)
	}
	clock.Advance(time.Minute)
	rec := adapterstest.New()
	after := senderFor(gateway.NewStore(db, clock.Now), rec, gateway.SenderOptions{})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- after.Run(runCtx) }()
	waitCtx, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	if _, err := rec.WaitSent(waitCtx, 1); err != nil {
		t.Fatal(err)
	}
	after.Wake()
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if got := rec.Sent(); len(got) != 1 {
		t.Fatalf("sent %d times", len(got))
	}
}

// A reply the platform won't deliver (the person blocked the bot) is
// failed at once, not retried for hours.
func TestUndeliverableFailsAtOnce(t *testing.T) {
	undeliverable := fmt.Errorf("telegram sendMessage: 403 Forbidden: bot was blocked by the user: %w", adapters.ErrUndeliverable)
	if !errors.Is(undeliverable, adapters.ErrUndeliverable) {
		t.Fatal("the error doesn't wrap ErrUndeliverable")
	}
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		store := gateway.NewStore(open(t), clock.Now)
		rec := adapterstest.New()
		s := senderFor(store, rec, gateway.SenderOptions{MaxAttempts: 12})
		if err := store.QueueReplies(ctx, []gateway.Reply{{Key: "b:0", Adapter: "tg", ChatID: "1", Text: "to someone who blocked the bot"}}); err != nil {
			t.Fatal(err)
		}
		rec.FailNext(1, undeliverable)
		if n, _ := s.SendDue(ctx); n != 0 {
			t.Fatalf("sent %d", n)
		}
		failed, err := store.Unsent(ctx, "failed", 10)
		if err != nil || len(failed) != 1 || failed[0].Attempts != 1 || !strings.Contains(failed[0].LastError, "blocked") {
			t.Fatalf("after one undeliverable attempt, failed: %+v %v", failed, err)
		}
		// An operator's retry sends it once the cause is gone.
		if err := store.Retry(ctx, failed[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := store.Retry(ctx, failed[0].ID); !errors.Is(err, gateway.ErrNotFailed) {
			t.Fatalf("retrying a pending reply: %v", err)
		}
		if n, _ := s.SendDue(ctx); n != 1 || len(rec.Sent()) != 1 {
			t.Fatalf("the retried reply: sent %d", n)
		}
		if b, err := store.Backlog(ctx); err != nil || b.Pending != 0 || b.Failed != 0 {
			t.Fatalf("backlog after the retry: %+v %v", b, err)
		}
	})
}

// On a SQLite file this process holds, an idle sender's polls read
// nothing; a reply queued without a wake is still found by the next poll,
// and a retry comes due with nothing written meanwhile.
func TestIdleSenderLeavesTheDatabaseAlone(t *testing.T) {
	db := dbtest.SQLite(t)
	db.HoldsFile()
	reads := dbtest.CountReads(db)
	store := gateway.NewStore(db, nil)
	rec := adapterstest.New()
	var retries atomic.Int64
	s := senderFor(store, rec, gateway.SenderOptions{Poll: 10 * time.Millisecond,
		Backoff: func(int) time.Duration { return 200 * time.Millisecond },
		OnRetry: func(adapters.ID) { retries.Add(1) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	if n := dbtest.IdleReads(reads, 300*time.Millisecond); n != 0 { // thirty polls
		t.Fatalf("an idle sender read the outbox %d times in thirty polls", n)
	}

	rec.FailNext(1, errors.New("platform unreachable"))
	if err := store.QueueReplies(ctx, []gateway.Reply{{Key: "k:0", Adapter: "tg", ChatID: "1", Text: "hello"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(rec.Sent()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the reply was never sent (%d retries)", retries.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := retries.Load(); n != 1 {
		t.Fatalf("sent after %d failed attempts, want 1", n)
	}
	if got := rec.Sent(); len(got) != 1 || got[0].Text != "hello" {
		t.Fatalf("sent %v", got)
	}
}

// Where other processes may write the database (PostgreSQL, or a SQLite
// file this process does not hold), the sender looks on every poll.
func TestSenderPollsWhenItCannotSeeEveryWrite(t *testing.T) {
	db := dbtest.SQLite(t) // not held: another process may write it
	reads := dbtest.CountReads(db)
	s := senderFor(gateway.NewStore(db, nil), adapterstest.New(), gateway.SenderOptions{Poll: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	before := reads.Load()
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-done
	if n := reads.Load() - before; n < 5 {
		t.Fatalf("the sender looked %d times in thirty polls", n)
	}
}
