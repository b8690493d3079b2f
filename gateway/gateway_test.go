package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// rig is a gateway on a real database with a recording adapter and a
// running outbox sender.
type rig struct {
	t     *testing.T
	db    *dbutil.DB
	gw    *gateway.Gateway
	store *gateway.Store
	sess  *sessions.SQLStore
	rec   *adapterstest.Recorder
	ctx   context.Context
}

func newRig(t *testing.T, db *dbutil.DB, run gateway.RunFunc, mutate func(*gateway.Options)) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rec := adapterstest.New()
	store := gateway.NewStore(db, nil)
	sender := gateway.NewSender(store, gateway.SenderOptions{
		Adapter: func(id adapters.ID) (adapters.Adapter, bool) { return rec, id == "tg" || id == "tg-stream" },
		Poll:    10 * time.Millisecond,
	})
	sess := sessions.NewStore(db)
	opts := gateway.Options{Store: store, Sessions: sess, Sender: sender, Runner: run, Channels: rigChannels{rec},
		Agents: []gateway.Agent{{ID: "default", Mode: gateway.ModeFollowup}},
	}
	if mutate != nil {
		mutate(&opts)
	}
	gw, err := gateway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sender.Run(ctx); close(done) }()
	t.Cleanup(func() {
		closeCtx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		if err := gw.Close(closeCtx); err != nil {
			t.Errorf("close gateway: %v", err)
		}
		cancel()
		<-done
	})
	return &rig{t: t, db: db, gw: gw, store: store, sess: sess, rec: rec, ctx: ctx}
}

// rigChannels are the rig's channels: "tg", and "tg-stream", whose
// replies are shown as they are written (and which shows no typing).
type rigChannels struct{ rec *adapterstest.Recorder }

func (c rigChannels) Adapter(id adapters.ID) (adapters.Adapter, bool) {
	switch id {
	case "tg":
		return c.rec, true
	case "tg-stream":
		return streamingOnly{c.rec, c.rec, c.rec}, true
	}
	return nil, false
}

func (rigChannels) Streams(id adapters.ID) bool { return id == "tg-stream" }

// streamingOnly is a channel that edits messages but shows no typing.
type streamingOnly struct {
	adapters.Adapter
	adapters.Editor
	adapters.Limiter
}

// compacting is a runner whose /compact is compact.
type compacting struct {
	gateway.Runner
	compact func(ctx context.Context, s sessions.Session, agentID string) (string, error)
}

func (c compacting) Compact(ctx context.Context, s sessions.Session, agentID string) (string, error) {
	return c.compact(ctx, s, agentID)
}

func msg(id, text string) adapters.Inbound {
	return adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "42", UserID: "7", DisplayName: "Ann",
		MessageID: id, Text: text, Time: time.Now()}
}

func (r *rig) deliver(in adapters.Inbound) {
	r.t.Helper()
	if err := r.gw.Deliver(r.ctx, in); err != nil {
		r.t.Fatalf("Deliver(%s): %v", in.MessageID, err)
	}
}

// sent waits for n sends and returns their texts.
func (r *rig) sent(n int) []string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	out, err := r.rec.WaitSent(ctx, n)
	if err != nil {
		r.t.Fatalf("%v (got %v)", err, out)
	}
	var texts []string
	for _, o := range out {
		texts = append(texts, o.Text)
	}
	return texts
}

func echoRun(ctx context.Context, in gateway.TurnInput) (string, error) {
	var parts []string
	for _, m := range in.Messages {
		parts = append(parts, m.Text)
	}
	return "echo: " + strings.Join(parts, " + "), nil
}

func TestDeliverRunsATurnAndRepliesOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		var mu sync.Mutex
		var sessionsSeen []sessions.ID
		r := newRig(t, open(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
			mu.Lock()
			sessionsSeen = append(sessionsSeen, in.Session.ID)
			mu.Unlock()
			return echoRun(ctx, in)
		}, nil)
		r.deliver(msg("1", "hello"))
		r.deliver(msg("1", "hello")) // the platform redelivers
		r.deliver(msg("2", "again"))
		if got := r.sent(2); got[0] != "echo: hello" || got[1] != "echo: again" {
			t.Fatalf("replies %q", got)
		}
		if r.gw.Duplicates() != 1 {
			t.Fatalf("duplicates %d", r.gw.Duplicates())
		}
		sent := r.rec.Sent()
		if sent[0].ChatID != "42" || sent[0].ReplyTo != "1" {
			t.Fatalf("reply addressed to %+v", sent[0])
		}
		mu.Lock()
		if len(sessionsSeen) != 2 || sessionsSeen[0] != sessionsSeen[1] {
			t.Fatalf("turns ran in sessions %v", sessionsSeen)
		}
		mu.Unlock()
		waitUnfinished(t, r.store, 0)
	})
}

func waitUnfinished(t *testing.T, s *gateway.Store, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := s.Unanswered(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d unfinished messages, want %d", n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRepliesAreChunkedInOrder(t *testing.T) {
	long := strings.Repeat("word ", 30) // 150 chars
	r := newRig(t, dbtest.SQLite(t), func(context.Context, gateway.TurnInput) (string, error) { return long, nil }, nil)
	r.rec.Limit = 40
	r.deliver(msg("1", "talk"))
	got := r.sent(4)
	if strings.Join(strings.Fields(strings.Join(got, " ")), " ") != strings.TrimSpace(long) {
		t.Fatalf("chunks %q do not add up to the reply", got)
	}
	for _, c := range got {
		if len(c) > 40 {
			t.Fatalf("chunk over the limit: %q", c)
		}
	}
}

func TestCommands(t *testing.T) {
	started := make(chan struct{}, 1)
	r := newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
		if in.Messages[0].Text == "slow" {
			started <- struct{}{}
			<-ctx.Done()
			return "partial", ctx.Err()
		}
		return echoRun(ctx, in)
	}, nil)
	r.deliver(msg("1", "slow"))
	<-started
	r.deliver(msg("2", "queued"))
	r.deliver(msg("3", "/status"))
	if got := r.sent(1)[0]; !strings.Contains(got, "telegram:42") || !strings.Contains(got, "1 queued") || !strings.Contains(got, "busy") {
		t.Fatalf("/status while busy: %q", got)
	}
	r.deliver(msg("4", "/stop@parleybot"))
	got := r.sent(4)
	// "Stopped." and the aborted turn's partial answer are queued at the
	// same moment, from two goroutines: either may go first.
	stopped := []string{got[1], got[2]}
	slices.Sort(stopped)
	if stopped[0] != "Stopped." || stopped[1] != "partial" || got[3] != "echo: queued" {
		t.Fatalf("after /stop: %q", got)
	}
	before, err := r.sess.Active(r.ctx, gateway.SessionKey(msg("x", ""), "default"))
	if err != nil {
		t.Fatal(err)
	}
	r.deliver(msg("5", "/reset"))
	if got := r.sent(5)[4]; got != "Started a new conversation." {
		t.Fatalf("/reset: %q", got)
	}
	after, err := r.sess.Active(r.ctx, before.Key)
	if err != nil || after.ID == before.ID {
		t.Fatalf("/reset kept session %s (%v)", after.ID, err)
	}
	r.deliver(msg("6", "/nothing-like-a-command"))
	if got := r.sent(6)[5]; got != "echo: /nothing-like-a-command" {
		t.Fatalf("an unknown /word is a message: %q", got)
	}
}

func TestQueueFullTellsTheSender(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	r := newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
		if in.Messages[0].Text == "first" {
			started <- struct{}{}
			<-release
		}
		return "", nil
	}, func(o *gateway.Options) { o.Lanes.Cap = 2 })
	r.deliver(msg("1", "first"))
	<-started
	r.deliver(msg("2", "a"))
	r.deliver(msg("3", "b"))
	r.deliver(msg("4", "c"))
	if got := r.sent(1)[0]; !strings.Contains(got, "still working through 2 earlier messages") {
		t.Fatalf("queue-full reply %q", got)
	}
	close(release)
}

func TestTurnErrorIsReported(t *testing.T) {
	r := newRig(t, dbtest.SQLite(t), func(context.Context, gateway.TurnInput) (string, error) {
		return "", errors.New("model openai/gpt-4o-mini: stream broken\nstack details")
	}, nil)
	r.deliver(msg("1", "hi"))
	// Plain words and a reference id, never the error's text.
	if got := r.sent(1)[0]; !refReply.MatchString(got) || !strings.HasPrefix(got, "Sorry, something went wrong while answering (ref ") ||
		strings.Contains(got, "openai") || strings.Contains(got, "stream broken") {
		t.Fatalf("error reply %q", got)
	}
	waitUnfinished(t, r.store, 0)
}

func TestRecoveryAfterACrash(t *testing.T) {
	for _, mode := range []gateway.Recovery{gateway.RecoveryRerun, gateway.RecoveryMark} {
		t.Run(string(mode), func(t *testing.T) {
			db := dbtest.SQLite(t)
			// The crashed process accepted two messages and answered neither.
			crashed := gateway.NewStore(db, nil)
			for i := range 2 {
				if _, _, err := crashed.Accept(context.Background(), msg(fmt.Sprint(i), fmt.Sprintf("lost %d", i))); err != nil {
					t.Fatal(err)
				}
			}
			r := newRig(t, db, echoRun, func(o *gateway.Options) { o.Recovery = mode })
			n, err := r.gw.Recover(r.ctx)
			if err != nil || n != 2 {
				t.Fatalf("Recover: %d %v", n, err)
			}
			got := r.sent(2)
			want := []string{"echo: lost 0", "echo: lost 1"}
			if mode == gateway.RecoveryMark {
				want = []string{"Sorry, I restarted before answering your message; please send it again if you still need an answer.",
					"Sorry, I restarted before answering your message; please send it again if you still need an answer."}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after recovery sent %q, want %q", got, want)
			}
			waitUnfinished(t, r.store, 0)
			if n, _ := r.gw.Recover(r.ctx); n != 0 {
				t.Fatalf("a second Recover found %d", n)
			}
		})
	}
}

// A turn that takes a while shows the typing indicator while it runs; one
// whose reply is ready at once sends none.
func TestTypingWhileATurnRuns(t *testing.T) {
	var r *rig
	slow := true
	r = newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
		if !slow {
			return "quick", nil
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := r.rec.Typings()
			if len(got) > 0 && got[0] == "42" {
				return "done", nil
			}
			if len(got) > 0 || time.Now().After(deadline) {
				return "", fmt.Errorf("no typing indicator while the turn ran: %v", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}, nil)
	r.deliver(msg("1", "hi"))
	if got := r.sent(1)[0]; got != "done" {
		t.Fatalf("reply %q", got)
	}
	typed := len(r.rec.Typings())
	slow = false
	r.deliver(msg("2", "again"))
	if got := r.sent(2)[1]; got != "quick" {
		t.Fatalf("reply %q", got)
	}
	time.Sleep(500 * time.Millisecond) // past the typing delay: nothing may follow the reply
	if n := len(r.rec.Typings()); n != typed {
		t.Fatalf("a reply ready at once was preceded or followed by %d typing indicators", n-typed)
	}
}

// A shutdown past its deadline loses nothing: the cut-short turn and the
// messages behind it stay accepted and are answered after the restart.
func TestShutdownPastDeadlineLeavesMessagesForRecovery(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	started := make(chan struct{}, 1)
	store := gateway.NewStore(db, nil)
	gw, err := gateway.New(gateway.Options{Store: store, Sessions: sessions.NewStore(db),
		Agents: []gateway.Agent{{ID: "default"}},
		Runner: gateway.RunFunc(func(ctx context.Context, in gateway.TurnInput) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			return "partial", ctx.Err()
		})})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := gw.Deliver(ctx, msg(fmt.Sprint(i), fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	closeCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := gw.Close(closeCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v", err)
	}
	if n, _ := store.Unanswered(ctx); n != 3 {
		t.Fatalf("%d messages left for recovery, want 3", n)
	}
	if due, _ := store.DueReplies(ctx, 10); len(due) != 0 {
		t.Fatalf("shutdown queued replies: %+v", due)
	}
	r := newRig(t, db, echoRun, nil)
	if n, err := r.gw.Recover(r.ctx); err != nil || n != 3 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	if got := r.sent(3); fmt.Sprint(got) != "[echo: m0 echo: m1 echo: m2]" {
		t.Fatalf("after restart sent %q", got)
	}
}

func TestPanickingTurnIsAnswered(t *testing.T) {
	r := newRig(t, dbtest.SQLite(t), func(context.Context, gateway.TurnInput) (string, error) { panic("bug") }, nil)
	r.deliver(msg("1", "hi"))
	if got := r.sent(1)[0]; !regexp.MustCompile(`^Sorry, something went wrong while answering \(ref [0-9a-f]{8}\); please try again shortly\.$`).MatchString(got) {
		t.Fatalf("reply %q", got)
	}
	waitUnfinished(t, r.store, 0)
}

// /reset takes its place in the queue: what was sent before it is answered
// in the old session, what comes after in the new one.
func TestResetRunsInOrder(t *testing.T) {
	for _, mode := range []gateway.Mode{gateway.ModeFollowup, gateway.ModeCollect, gateway.ModeSteer, gateway.ModeInterrupt} {
		t.Run(string(mode), func(t *testing.T) {
			started := make(chan struct{}, 1)
			var mu sync.Mutex
			seen := map[string]sessions.ID{}
			r := newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
				mu.Lock()
				for _, m := range in.Messages {
					seen[m.Text] = in.Session.ID
				}
				mu.Unlock()
				if in.Messages[0].Text == "A" {
					started <- struct{}{}
					<-ctx.Done()
					return "partial", ctx.Err()
				}
				return echoRun(ctx, in)
			}, func(o *gateway.Options) { o.Agents[0].Mode = mode })
			r.deliver(msg("1", "A"))
			<-started
			if mode != gateway.ModeInterrupt { // interrupt would cut A short at once
				r.deliver(msg("2", "B"))
			}
			r.deliver(msg("3", "/reset"))
			r.deliver(msg("4", "C"))
			want := 4
			if mode == gateway.ModeInterrupt {
				want = 3
			}
			got := r.sent(want)
			if got[len(got)-2] != "Started a new conversation." || got[len(got)-1] != "echo: C" {
				t.Fatalf("replies %q", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if seen["C"] == seen["A"] || seen["C"] == "" {
				t.Fatalf("C ran in the old session: %v", seen)
			}
			if mode != gateway.ModeInterrupt && seen["B"] != seen["A"] {
				t.Fatalf("B, sent before /reset, ran in the new session: %v", seen)
			}
		})
	}
}

// Recovery on start takes only what an earlier life of the process left:
// messages delivered while it runs are answered once, not twice.
func TestRecoverRacingDeliverRunsEachMessageOnce(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	run := func(ctx context.Context, in gateway.TurnInput) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range in.Messages {
			runs[m.MessageID]++
		}
		return "ok", nil
	}
	r := newRig(t, dbtest.SQLite(t), run, func(o *gateway.Options) {
		o.Lanes.Debounce = 0
	})
	const n = 30
	done := make(chan error, 1)
	go func() {
		for range 5 {
			if _, err := r.gw.Recover(r.ctx); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range n {
		in := msg(fmt.Sprint("r", i), "hi")
		in.ChatID = fmt.Sprint("chat-", i) // a session each, so all run at once
		r.deliver(in)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.sent(n)
	waitUnfinished(t, r.store, 0)
	time.Sleep(50 * time.Millisecond) // a duplicate run would land by now
	mu.Lock()
	defer mu.Unlock()
	for id, c := range runs {
		if c != 1 {
			t.Errorf("message %s ran %d times", id, c)
		}
	}
	if len(runs) != n {
		t.Fatalf("%d messages ran, want %d", len(runs), n)
	}
	if got := len(r.rec.Sent()); got != n {
		t.Fatalf("%d replies sent, want %d", got, n)
	}
}

// /compact waits for the running turn, runs between turns on the lane, and
// answers with what the compaction did.
func TestCompactRunsBetweenTurns(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var order []string
	r := newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
		mu.Lock()
		order = append(order, "turn "+in.Messages[0].Text)
		mu.Unlock()
		if in.Messages[0].Text == "A" {
			started <- struct{}{}
			<-release
		}
		return echoRun(ctx, in)
	}, func(o *gateway.Options) {
		o.Runner = compacting{o.Runner, func(ctx context.Context, s sessions.Session, agentID string) (string, error) {
			mu.Lock()
			order = append(order, "compact "+agentID)
			mu.Unlock()
			if s.ID == "" {
				return "", errors.New("no session")
			}
			return "Summarized 4 earlier messages.", nil
		}}
	})
	r.deliver(msg("1", "A"))
	<-started
	r.deliver(msg("2", "/compact"))
	r.deliver(msg("3", "B"))
	close(release)
	got := r.sent(3)
	if got[0] != "echo: A" || got[1] != "Summarized 4 earlier messages." || got[2] != "echo: B" {
		t.Fatalf("replies %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(order, ", ") != "turn A, compact default, turn B" {
		t.Fatalf("order %q", order)
	}
}

func TestCompactWithoutASession(t *testing.T) {
	r := newRig(t, dbtest.SQLite(t), echoRun, func(o *gateway.Options) {
		o.Runner = compacting{o.Runner, func(context.Context, sessions.Session, string) (string, error) {
			return "", errors.New("must not be called")
		}}
	})
	r.deliver(msg("1", "/compact@parleybot"))
	if got := r.sent(1); got[0] != "Nothing to compact yet." {
		t.Fatalf("replies %q", got)
	}
}

// A turn is a rerun when a try before it may have begun it: a message
// recovered after the turn that took it was cut short is run again with
// Rerun set (what that try kept, such as its files, may be there); a new
// message's turn is not.
func TestRecoveredTurnIsARerun(t *testing.T) {
	db := dbtest.SQLite(t)
	ctx := context.Background()
	started := make(chan struct{}, 1)
	store := gateway.NewStore(db, nil)
	gw, err := gateway.New(gateway.Options{Store: store, Sessions: sessions.NewStore(db),
		Agents: []gateway.Agent{{ID: "default"}},
		Runner: gateway.RunFunc(func(ctx context.Context, in gateway.TurnInput) (string, error) {
			if in.Rerun {
				t.Errorf("the first try of %q is marked a rerun", in.Messages[0].Text)
			}
			started <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		})})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Deliver(ctx, msg("1", "cut short")); err != nil {
		t.Fatal(err)
	}
	<-started
	closeCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := gw.Close(closeCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v", err)
	}
	var mu sync.Mutex
	reruns := map[string]bool{}
	r := newRig(t, db, func(ctx context.Context, in gateway.TurnInput) (string, error) {
		mu.Lock()
		for _, m := range in.Messages {
			reruns[m.Text] = in.Rerun
		}
		mu.Unlock()
		return echoRun(ctx, in)
	}, nil)
	if n, err := r.gw.Recover(r.ctx); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	r.sent(1)
	r.deliver(msg("2", "new"))
	r.sent(2)
	mu.Lock()
	defer mu.Unlock()
	if !reruns["cut short"] || reruns["new"] {
		t.Fatalf("reruns %v; want the recovered message's turn a rerun and the new one's not", reruns)
	}
}
