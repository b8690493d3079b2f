package dbutil

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Reads on a few goroutines. SQLite here is C code translated to Go, and
// its statement engine uses deep stack frames: a goroutine that steps a
// query grows its stack to tens of kilobytes and keeps it until the
// collector shrinks it. With a thousand conversations in flight, every
// lane goroutine stepping its own reads held tens of megabytes of stack.
// View hands the read to one of ReadConns reader goroutines instead, so the
// deep stacks are few and reused; the caller only waits.

type viewRequest struct {
	ctx  context.Context
	fn   func(Querier) error
	done chan error
}

// startReaders starts n reader goroutines; Close stops them.
func (d *DB) startReaders(n int) {
	d.views = make(chan *viewRequest)
	d.readersMu = new(sync.RWMutex)
	d.stopReaders = make(chan struct{})
	d.readersDone = new(sync.WaitGroup)
	for range n {
		d.readersDone.Add(1)
		go d.readerLoop()
	}
}

func (d *DB) readerLoop() {
	defer d.readersDone.Done()
	q := querier{db: d.read, cache: d.readStmts}
	for {
		select {
		case <-d.stopReaders:
			return
		case r := <-d.views:
			if err := r.ctx.Err(); err != nil {
				r.done <- err
				continue
			}
			r.done <- callView(r.fn, q)
		}
	}
}

// callView runs fn, turning a panic into an error so a bad read can't take
// a reader goroutine down.
func callView(fn func(Querier) error, q Querier) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("read panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(q)
}

// Brief is the context for a statement that is over in microseconds, such
// as a lookup by key. On SQLite it is ctx without its cancellation, so the
// driver starts no goroutine to watch for it: View's hand-off to a reader
// already honours ctx, and busy_timeout bounds any wait on the file. On
// PostgreSQL the statement crosses the network and can wait on a lock, so
// it is ctx itself.
func (d *DB) Brief(ctx context.Context) context.Context {
	if d.Dialect == SQLite {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// View runs fn with the read querier (read-only on SQLite). Scan every row
// inside fn: the rows belong to the reader that ran it. On SQLite fn runs
// on one of the reader goroutines; on PostgreSQL it runs on the caller's.
func (d *DB) View(ctx context.Context, fn func(q Querier) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if o := d.observer.Load(); o != nil {
		defer observe(*o, OpRead, time.Now())
	}
	if d.views == nil {
		return fromDB(callView(fn, d.Read()))
	}
	r := &viewRequest{ctx: ctx, fn: fn, done: make(chan error, 1)}
	d.readersMu.RLock()
	if d.readersClosed {
		d.readersMu.RUnlock()
		return errDBClosed
	}
	select {
	case d.views <- r:
		d.readersMu.RUnlock()
	case <-ctx.Done():
		d.readersMu.RUnlock()
		return ctx.Err()
	}
	return fromDB(<-r.done)
}

func (d *DB) stopReaderLoops() {
	if d.stopReaders == nil {
		return
	}
	d.readersMu.Lock()
	if !d.readersClosed {
		d.readersClosed = true
		close(d.stopReaders)
	}
	d.readersMu.Unlock()
	d.readersDone.Wait()
}
