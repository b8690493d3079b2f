package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type item struct {
	key string
	n   int
}

// wait fails the test if ch yields nothing within a generous deadline.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func closeLanes[K comparable, T any](t *testing.T, ls *Lanes[K, T]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ls.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestLanesOrderAcrossManySessions(t *testing.T) {
	const sessions, perSession = 100, 50
	var mu sync.Mutex
	seen := map[string][]int{}
	turns := 0
	ls := NewLanes(func(ctx context.Context, key string, turn *Turn[item]) {
		mu.Lock()
		defer mu.Unlock()
		turns++
		for _, it := range turn.Items {
			seen[key] = append(seen[key], it.n)
		}
	}, LaneOptions[string]{Cap: perSession})
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("s%d", s)
			for n := range perSession {
				if _, err := ls.Enqueue(key, item{key, n}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	closeLanes(t, ls)
	if turns != sessions*perSession {
		t.Fatalf("%d turns, want one per message (%d)", turns, sessions*perSession)
	}
	for s := range sessions {
		got := seen[fmt.Sprintf("s%d", s)]
		if len(got) != perSession {
			t.Fatalf("session %d handled %d messages", s, len(got))
		}
		for i, n := range got {
			if n != i {
				t.Fatalf("session %d out of order: %v", s, got)
			}
		}
	}
	if ls.Active() != 0 {
		t.Fatalf("%d lanes left after draining", ls.Active())
	}
}

func TestBlockedSessionDoesNotDelayOthers(t *testing.T) {
	release := make(chan struct{})
	done := make(chan string, 10)
	ls := NewLanes(func(ctx context.Context, key string, turn *Turn[item]) {
		if key == "slow" {
			<-release
		}
		done <- key
	}, LaneOptions[string]{})
	defer closeLanes(t, ls)
	if _, err := ls.Enqueue("slow", item{}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := ls.Enqueue(fmt.Sprintf("fast%d", i), item{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		if k := wait(t, done, "a fast session"); k == "slow" {
			t.Fatal("the slow session finished while blocked")
		}
	}
	close(release)
	if k := wait(t, done, "the slow session"); k != "slow" {
		t.Fatalf("got %s", k)
	}
}

// blocker is a turn function whose first turn waits until released.
type blocker struct {
	started chan []item
	release chan struct{}
	turns   chan []item
}

func newBlocker() *blocker {
	return &blocker{started: make(chan []item, 1), release: make(chan struct{}), turns: make(chan []item, 100)}
}

func (b *blocker) run(ctx context.Context, key string, turn *Turn[item]) {
	select {
	case b.started <- turn.Items:
		<-b.release
	default:
	}
	b.turns <- turn.Items
}

func TestQueueCap(t *testing.T) {
	b := newBlocker()
	ls := NewLanes(b.run, LaneOptions[string]{})
	defer closeLanes(t, ls)
	if _, err := ls.Enqueue("k", item{n: 0}); err != nil {
		t.Fatal(err)
	}
	wait(t, b.started, "the first turn")
	for n := 1; n <= DefaultQueueCap; n++ {
		depth, err := ls.Enqueue("k", item{n: n})
		if err != nil || depth != n {
			t.Fatalf("message %d: depth %d, %v", n, depth, err)
		}
	}
	depth, err := ls.Enqueue("k", item{n: 99})
	if !errors.Is(err, ErrQueueFull) || depth != DefaultQueueCap || !strings.Contains(err.Error(), "20 messages are waiting") {
		t.Fatalf("over the cap: depth %d, %v", depth, err)
	}
	if ls.Depth("k") != DefaultQueueCap {
		t.Fatalf("depth %d", ls.Depth("k"))
	}
	close(b.release)
	for n := 0; n <= DefaultQueueCap; n++ {
		got := wait(t, b.turns, "a queued turn")
		if len(got) != 1 || got[0].n != n {
			t.Fatalf("turn %d got %v", n, got)
		}
	}
}

func TestModes(t *testing.T) {
	t.Run("collect", func(t *testing.T) {
		b := newBlocker()
		ls := NewLanes(b.run, LaneOptions[string]{Mode: func(string) Mode { return ModeCollect }})
		defer closeLanes(t, ls)
		ls.Enqueue("k", item{n: 0})
		wait(t, b.started, "the first turn")
		for n := 1; n <= 3; n++ {
			ls.Enqueue("k", item{n: n})
		}
		close(b.release)
		if got := wait(t, b.turns, "turn 1"); len(got) != 1 {
			t.Fatalf("first turn %v", got)
		}
		got := wait(t, b.turns, "the collected turn")
		if len(got) != 3 || got[0].n != 1 || got[2].n != 3 {
			t.Fatalf("collected turn %v, want messages 1-3 together", got)
		}
	})

	t.Run("steer", func(t *testing.T) {
		atBoundary := make(chan struct{})
		proceed := make(chan struct{})
		steered := make(chan []item, 1)
		turns := make(chan []item, 10)
		first := true
		ls := NewLanes(func(ctx context.Context, key string, turn *Turn[item]) {
			if first {
				first = false
				close(atBoundary)
				<-proceed
				steered <- turn.Steer() // the step boundary
			}
			turns <- turn.Items
		}, LaneOptions[string]{Mode: func(string) Mode { return ModeSteer }})
		defer closeLanes(t, ls)
		ls.Enqueue("k", item{n: 0})
		wait(t, atBoundary, "the first step")
		ls.Enqueue("k", item{n: 1})
		ls.Enqueue("k", item{n: 2})
		close(proceed)
		if got := wait(t, steered, "steered messages"); len(got) != 2 || got[0].n != 1 || got[1].n != 2 {
			t.Fatalf("steered %v", got)
		}
		if got := wait(t, turns, "turn"); len(got) != 1 || got[0].n != 0 {
			t.Fatalf("turn %v", got)
		}
		closeLanes(t, ls)
		if len(turns) != 0 {
			t.Fatalf("steered messages also ran as a turn: %v", <-turns)
		}
	})

	t.Run("steer leftovers run next", func(t *testing.T) {
		b := newBlocker() // never calls Steer
		ls := NewLanes(b.run, LaneOptions[string]{Mode: func(string) Mode { return ModeSteer }})
		defer closeLanes(t, ls)
		ls.Enqueue("k", item{n: 0})
		wait(t, b.started, "the first turn")
		ls.Enqueue("k", item{n: 1})
		close(b.release)
		wait(t, b.turns, "turn 1")
		if got := wait(t, b.turns, "the leftover turn"); len(got) != 1 || got[0].n != 1 {
			t.Fatalf("leftover turn %v", got)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		started := make(chan struct{}, 1)
		results := make(chan string, 10)
		ls := NewLanes(func(ctx context.Context, key string, turn *Turn[item]) {
			if turn.Items[0].n == 0 {
				started <- struct{}{}
				<-ctx.Done()
				results <- "aborted"
				return
			}
			results <- fmt.Sprintf("ran %d", turn.Items[0].n)
		}, LaneOptions[string]{Mode: func(string) Mode { return ModeInterrupt }})
		defer closeLanes(t, ls)
		ls.Enqueue("k", item{n: 0})
		wait(t, started, "the first turn")
		ls.Enqueue("k", item{n: 1})
		if got := wait(t, results, "the abort"); got != "aborted" {
			t.Fatalf("got %q", got)
		}
		if got := wait(t, results, "the new turn"); got != "ran 1" {
			t.Fatalf("got %q", got)
		}
	})
}

func TestDebounceMergesABurst(t *testing.T) {
	b := newBlocker()
	close(b.release)
	ls := NewLanes(b.run, LaneOptions[string]{Debounce: 300 * time.Millisecond})
	defer closeLanes(t, ls)
	for n := range 3 {
		ls.Enqueue("k", item{n: n})
	}
	if got := wait(t, b.turns, "the burst"); len(got) != 3 {
		t.Fatalf("burst turn %v, want all three messages", got)
	}
}

func TestAbortAndPanicRecovery(t *testing.T) {
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{&logBuf, &logMu}, nil))
	started := make(chan struct{}, 1)
	results := make(chan string, 10)
	ls := NewLanes(func(ctx context.Context, key string, turn *Turn[item]) {
		switch turn.Items[0].n {
		case 0:
			started <- struct{}{}
			<-ctx.Done()
			results <- "aborted"
		case 1:
			panic("boom")
		default:
			results <- "ran"
		}
	}, LaneOptions[string]{Log: log})
	ls.Enqueue("k", item{n: 0})
	wait(t, started, "the first turn")
	ls.Enqueue("k", item{n: 1})
	ls.Enqueue("k", item{n: 2})
	if ls.Abort("nobody") {
		t.Fatal("Abort of an idle lane reported a turn")
	}
	if !ls.Abort("k") {
		t.Fatal("Abort found no running turn")
	}
	if got := wait(t, results, "abort"); got != "aborted" {
		t.Fatal(got)
	}
	if got := wait(t, results, "the turn after the panic"); got != "ran" {
		t.Fatal(got)
	}
	closeLanes(t, ls)
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logBuf.String(), "turn panicked") || !strings.Contains(logBuf.String(), "boom") {
		t.Fatalf("panic not logged: %s", logBuf.String())
	}
}

func TestCloseCancelsPastDeadline(t *testing.T) {
	cancelled := make(chan struct{})
	started := make(chan struct{})
	ls := NewLanes(func(ctx context.Context, key string, turn *Turn[item]) {
		close(started)
		<-ctx.Done()
		close(cancelled)
	}, LaneOptions[string]{})
	ls.Enqueue("k", item{})
	wait(t, started, "the turn")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := ls.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v", err)
	}
	wait(t, cancelled, "the turn's cancellation")
	if _, err := ls.Enqueue("k", item{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Enqueue after Close = %v", err)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
