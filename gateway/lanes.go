// Package gateway carries inbound messages to agent turns: dedupe, routing,
// session resolve, and the per-session lanes that run one turn at a time.
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/parleyd/parley/config"
)

// Mode says what a lane does with messages that arrive while it is busy.
type Mode string

const (
	// ModeFollowup gives each message its own turn, in order.
	ModeFollowup Mode = "followup"
	// ModeCollect runs everything that arrived during a turn as one turn.
	ModeCollect Mode = "collect"
	// ModeSteer hands messages to the running turn at its next step boundary.
	ModeSteer Mode = "steer"
	// ModeInterrupt aborts the running turn and starts one with the new messages.
	ModeInterrupt Mode = "interrupt"
)

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool {
	switch m {
	case ModeFollowup, ModeCollect, ModeSteer, ModeInterrupt:
		return true
	}
	return false
}

// Defaults for a lane's queue: the config's (gateway.queue_cap,
// gateway.debounce).
const (
	DefaultQueueCap = config.DefaultQueueCap
	DefaultDebounce = config.DefaultDebounce
)

// Turn is one run of a lane's turn function.
type Turn[T any] struct {
	// Items are the messages this turn answers, in arrival order.
	Items []T
	lane  *lane[T]
}

// Steer takes the messages that arrived for a steer-mode lane since the turn
// began (or since the last call), for the turn to inject at a step boundary.
// It returns nil in the other modes.
func (t *Turn[T]) Steer() []T {
	if t.lane == nil {
		return nil
	}
	return t.lane.takeSteer()
}

// TurnFunc runs one turn. ctx ends when the turn is aborted or the lanes
// shut down past their deadline.
type TurnFunc[K comparable, T any] func(ctx context.Context, key K, turn *Turn[T])

// LaneOptions configure every lane.
type LaneOptions[K comparable] struct {
	// Cap is the most messages waiting in one lane; more is ErrQueueFull.
	Cap int
	// Debounce merges a burst into one turn: a message that finds its lane
	// idle starts a window this long, and everything that arrives within it
	// is answered by the first turn. 0 turns it off.
	Debounce time.Duration
	// Mode picks a lane's queue mode; nil means followup for all.
	Mode func(K) Mode
	Log  *slog.Logger
}

// Lanes runs turns one at a time per key and in parallel across keys. A
// lane's goroutine exists only while the lane has work.
type Lanes[K comparable, T any] struct {
	run  TurnFunc[K, T]
	opts LaneOptions[K]
	ctx  context.Context // parent of every turn; cancelled by Close past its deadline, with cause ErrClosed
	stop context.CancelCauseFunc

	mu     sync.Mutex
	lanes  map[K]*lane[T]
	closed bool
	wg     sync.WaitGroup
}

type lane[T any] struct {
	mode    Mode
	pending []T
	steer   []T
	// isBarrier marks pending's barriers, index for index; barrierRunning
	// is set while a turn that holds one runs. While either holds, new
	// messages queue behind instead of steering or interrupting.
	isBarrier      []bool
	barrierRunning bool
	cancel         context.CancelFunc // set while a turn runs
	mu             *sync.Mutex        // the Lanes' mutex
}

// NewLanes returns lanes that run turns with run.
func NewLanes[K comparable, T any](run TurnFunc[K, T], opts LaneOptions[K]) *Lanes[K, T] {
	if opts.Cap <= 0 {
		opts.Cap = DefaultQueueCap
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancelCause(context.Background())
	return &Lanes[K, T]{run: run, opts: opts, ctx: ctx, stop: stop, lanes: make(map[K]*lane[T])}
}

// Enqueue adds item to key's lane and returns how many messages now wait in
// it. It never blocks on a running turn.
func (ls *Lanes[K, T]) Enqueue(key K, item T) (int, error) {
	return ls.enqueue(key, item, false)
}

// EnqueueBarrier adds item to key's lane as a barrier: it runs after every
// message queued before it and before every message queued after it, in
// every mode (it never steers or interrupts, and nothing steers into or
// interrupts the turn that runs it). Commands such as /reset use it.
func (ls *Lanes[K, T]) EnqueueBarrier(key K, item T) (int, error) {
	return ls.enqueue(key, item, true)
}

func (ls *Lanes[K, T]) enqueue(key K, item T, barrier bool) (int, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return 0, ErrClosed
	}
	l, exists := ls.lanes[key]
	if !exists {
		mode := ModeFollowup
		if ls.opts.Mode != nil {
			if m := ls.opts.Mode(key); m.Valid() {
				mode = m
			}
		}
		l = &lane[T]{mode: mode, mu: &ls.mu}
		ls.lanes[key] = l
	}
	if len(l.pending)+len(l.steer) >= ls.opts.Cap {
		return len(l.pending) + len(l.steer), fmt.Errorf("%w: %d messages are waiting", ErrQueueFull, ls.opts.Cap)
	}
	turnRunning := l.cancel != nil
	switch {
	case barrier || l.barrierAhead():
		l.push(item, barrier)
	case turnRunning && l.mode == ModeSteer:
		l.steer = append(l.steer, item)
	case turnRunning && l.mode == ModeInterrupt:
		l.push(item, false)
		l.cancel()
	default:
		l.push(item, false)
	}
	if !exists {
		ls.wg.Add(1)
		go ls.loop(key, l)
	}
	return len(l.pending) + len(l.steer), nil
}

// Depth is how many messages wait in key's lane, not counting a running turn's.
func (ls *Lanes[K, T]) Depth(key K) int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.lanes[key]; ok {
		return len(l.pending) + len(l.steer)
	}
	return 0
}

// Busy reports whether key's lane has a turn running or waiting.
func (ls *Lanes[K, T]) Busy(key K) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	_, ok := ls.lanes[key]
	return ok
}

// Waiting is how many messages wait in all lanes, running turns' not
// counted: at a scrape, it walks the lanes (a few thousand at most).
func (ls *Lanes[K, T]) Waiting() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	n := 0
	for _, l := range ls.lanes {
		n += len(l.pending) + len(l.steer)
	}
	return n
}

// Active is the number of lanes with work.
func (ls *Lanes[K, T]) Active() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.lanes)
}

// Abort cancels key's running turn; waiting messages still run. It reports
// whether a turn was running.
func (ls *Lanes[K, T]) Abort(key K) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.lanes[key]
	if !ok || l.cancel == nil {
		return false
	}
	l.cancel()
	return true
}

// Close stops accepting messages and waits for every lane to drain. When ctx
// ends first, running turns are cancelled with cause ErrClosed, waiting
// messages are left unrun, and Close waits for the turns to return.
func (ls *Lanes[K, T]) Close(ctx context.Context) error {
	ls.mu.Lock()
	ls.closed = true
	ls.mu.Unlock()
	done := make(chan struct{})
	go func() { ls.wg.Wait(); close(done) }()
	select {
	case <-done:
		ls.stop(ErrClosed)
		return nil
	case <-ctx.Done():
		ls.stop(ErrClosed)
		<-done
		return fmt.Errorf("lanes did not drain in time; running turns were cancelled: %w", ctx.Err())
	}
}

func (l *lane[T]) push(item T, barrier bool) {
	l.pending = append(l.pending, item)
	l.isBarrier = append(l.isBarrier, barrier)
}

func (l *lane[T]) barrierAhead() bool {
	if l.barrierRunning {
		return true
	}
	for _, b := range l.isBarrier {
		if b {
			return true
		}
	}
	return false
}

// take removes the first n pending items and reports whether a barrier
// was among them.
func (l *lane[T]) take(n int) ([]T, bool) {
	items := append([]T(nil), l.pending[:n]...)
	barrier := false
	for _, b := range l.isBarrier[:n] {
		barrier = barrier || b
	}
	l.pending, l.isBarrier = l.pending[n:], l.isBarrier[n:]
	return items, barrier
}

func (l *lane[T]) takeSteer() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.steer
	l.steer = nil
	return s
}

// loop is a lane's goroutine: it runs turns until the lane is empty, then
// removes the lane.
func (ls *Lanes[K, T]) loop(key K, l *lane[T]) {
	defer ls.wg.Done()
	if ls.opts.Debounce > 0 {
		ls.debounce()
	}
	// Without a debounce window there is no burst: followup turns take one
	// message each from the start.
	for burst := ls.opts.Debounce > 0; ; burst = false {
		ls.mu.Lock()
		if ls.ctx.Err() != nil {
			// Shut down past the deadline: leave what waits for the next
			// start (it is stored; recovery runs it).
			delete(ls.lanes, key)
			ls.mu.Unlock()
			return
		}
		// Steer messages the last turn did not take become a turn of their
		// own, ahead of anything queued behind a barrier (they came first).
		if len(l.steer) > 0 {
			l.pending = append(append([]T(nil), l.steer...), l.pending...)
			l.isBarrier = append(make([]bool, len(l.steer)), l.isBarrier...)
			l.steer = nil
		}
		if len(l.pending) == 0 {
			delete(ls.lanes, key)
			ls.mu.Unlock()
			return
		}
		n := len(l.pending)
		if l.mode == ModeFollowup && !burst {
			n = 1
		}
		items, hasBarrier := l.take(n)
		l.barrierRunning = hasBarrier
		ctx, cancel := context.WithCancel(ls.ctx)
		l.cancel = cancel
		ls.mu.Unlock()

		ls.runTurn(ctx, key, &Turn[T]{Items: items, lane: l})
		cancel()

		ls.mu.Lock()
		l.cancel = nil
		l.barrierRunning = false
		ls.mu.Unlock()
	}
}

// debounce waits out the burst window.
func (ls *Lanes[K, T]) debounce() {
	timer := time.NewTimer(ls.opts.Debounce)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ls.ctx.Done():
	}
}

func (ls *Lanes[K, T]) runTurn(ctx context.Context, key K, t *Turn[T]) {
	defer func() {
		if r := recover(); r != nil {
			ls.opts.Log.Error("turn panicked", "lane", fmt.Sprint(key), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	ls.run(ctx, key, t)
}
