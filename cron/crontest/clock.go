// Package crontest has a fake clock for testing code that uses the cron
// scheduler without waiting for real time.
package crontest

import (
	"sync"
	"testing"
	"time"
)

// Clock is a cron.Clock that moves only when told to.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters map[uint64]waiter
	// seq numbers the waits registered for a time still to come: a loop
	// that registers one has handled everything due and gone idle.
	seq     uint64
	changed chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, waiters: map[uint64]waiter{}, changed: make(chan struct{})}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// At returns a channel that receives once the clock reaches t, and a
// function that cancels the wait.
func (c *Clock) At(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch, func() {}
	}
	c.seq++
	id := c.seq
	c.waiters[id] = waiter{at: t, ch: ch}
	close(c.changed)
	c.changed = make(chan struct{})
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.waiters, id)
	}
}

// Pending is how many waits are registered for a time still to come.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// Advance moves the clock on by d and fires the waits whose time came. It
// returns how many it fired and a mark for WaitIdle.
func (c *Clock) Advance(d time.Duration) (fired int, mark uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for id, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
			delete(c.waiters, id)
			fired++
		}
	}
	return fired, c.seq
}

// Mark is the current mark for WaitIdle, to take before waking a loop some
// other way than the clock.
func (c *Clock) Mark() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// WaitIdle waits until a wait for a future time is registered after mark
// was taken: a timer loop has handled everything due and gone back to
// waiting. It fails the test after 10 seconds.
func (c *Clock) WaitIdle(t testing.TB, mark uint64) {
	t.Helper()
	c.waitSeq(t, mark+1)
}

func (c *Clock) waitSeq(t testing.TB, want uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		seq, changed := c.seq, c.changed
		c.mu.Unlock()
		if seq >= want {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for the loop to wait on the clock again (at %s)", c.Now())
		}
	}
}

// Step advances the clock by d and waits until every loop it woke is idle
// again. Call it while the loops are idle.
func (c *Clock) Step(t testing.TB, d time.Duration) {
	t.Helper()
	if fired, mark := c.Advance(d); fired > 0 {
		c.waitSeq(t, mark+uint64(fired))
	}
}
