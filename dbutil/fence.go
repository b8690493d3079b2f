package dbutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A Fence guards the writes of a replica that may have lost its place to
// another: one paused past its lease (a stopped process, a long GC pause, a
// frozen VM, a partition) must write nothing once a survivor has taken its
// work over.
type Fence interface {
	// Alive is the local check, run before every write: it fails once the
	// replica has gone longer than its lease without proving itself live.
	Alive() error
	// Check runs first in every write transaction, inside it: it fails
	// the transaction if the replica has been fenced, and holds the fence
	// off until the transaction ends.
	Check(ctx context.Context, q Querier) error
}

// ErrLeaseLapsed is a Fence's local refusal: the replica has gone longer
// than its lease without renewing it (the database out of reach, or the
// process paused). It passes like an unavailable database: the write may
// be tried again once the replica has renewed, or it stops, fenced.
var ErrLeaseLapsed = errors.New("this replica has not renewed its lease in time (is the database reachable?); writes wait until it has")

// SetFence guards every write from now on with f (nil: none).
func (d *DB) SetFence(f Fence) {
	if f == nil {
		d.fence.Store(nil)
		return
	}
	d.fence.Store(&f)
}

// Listen calls fn with the payload of each notification on a PostgreSQL
// channel until ctx ends, on a connection of its own (not the pool's).
// After a lost connection it connects again and calls fn with "" (some
// notifications may have been missed meanwhile: the caller looks again).
// ready, if set, is called each time the channel is listened to.
func (d *DB) Listen(ctx context.Context, channel string, ready func(), fn func(payload string)) error {
	if d.pool == nil {
		return errors.New("listen: only PostgreSQL has notifications")
	}
	first := true
	for ctx.Err() == nil {
		err := d.listenOnce(ctx, channel, func() {
			if ready != nil {
				ready()
			}
			if !first {
				fn("")
			}
			first = false
		}, fn)
		if ctx.Err() != nil {
			break
		}
		_ = err // the next connection says it again if it lasts
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return ctx.Err()
}

func (d *DB) listenOnce(ctx context.Context, channel string, ready func(), fn func(string)) error {
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("listen: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen to %s: %w", channel, err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}
