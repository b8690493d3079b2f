package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/parleyd/parley/dbutil"
)

// fence marks a replica fenced once its write transactions have ended;
// ok reports that this call did it (each dead replica is fenced once).
// A transaction of the replica still open after fenceWait (the process
// paused inside it) is ended: its backend is terminated, so the fence
// never waits for a process that may not run again.
func (m *Member) fence(ctx context.Context, id, why string) (ok bool, err error) {
	for try := 1; ; try++ {
		err = m.db.Tx(ctx, func(q dbutil.Querier) error {
			if _, err := q.ExecContext(ctx, fenceWaitQuery); err != nil {
				return err
			}
			if _, err := q.ExecContext(ctx, fenceLockQuery, id); err != nil {
				return err
			}
			res, err := q.ExecContext(ctx, fenceQuery, id)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			ok = n == 1
			return nil
		})
		if err == nil || !lockTimedOut(err) || try == fenceTries {
			break
		}
		n, terr := m.endTransactions(ctx, id)
		if terr != nil {
			err = terr
			break
		}
		m.opts.Log.Warn("ended the open transactions of a replica being fenced (its process paused inside them)", "replica", id, "count", n)
	}
	if err != nil {
		return false, fmt.Errorf("fence replica %s: %w", id, err)
	}
	if ok {
		m.opts.Log.Warn("replica fenced: "+why+"; its sessions, messages and channels are taken over", "replica", id)
	}
	return ok, nil
}

// The fence waits fenceWait for the replica's open transactions, then
// ends them; fenceTries bounds the rounds.
const (
	fenceWaitQuery = `SET LOCAL lock_timeout = '1s'`
	fenceTries     = 3
)

// endTransactionsQuery terminates the backends whose transactions hold a
// replica's fence lock (parley_fence takes it shared): $1 is the replica.
// pg_locks shows an advisory lock on two int4 keys as classid, objid (an
// oid: the unsigned form of the second key) and objsubid 2.
const endTransactionsQuery = `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_locks
	WHERE locktype = 'advisory' AND classid = 1885434465 AND objsubid = 2
	AND objid = ((hashtext($1)::BIGINT + 4294967296) % 4294967296)::OID
	AND granted AND pid <> pg_backend_pid()`

// endTransactions ends the open transactions of replica id.
func (m *Member) endTransactions(ctx context.Context, id string) (int, error) {
	var n int
	if err := m.db.Write().QueryRowContext(ctx, endTransactionsQuery, id).Scan(&n); err != nil {
		return 0, fmt.Errorf("end the open transactions of replica %s: %w", id, err)
	}
	return n, nil
}

// lockTimedOut reports a statement that waited past its lock_timeout.
func lockTimedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// fence is the Member as the database's write fence.
type fence struct{ m *Member }

func (f fence) Alive() error { return f.m.Alive() }

func (f fence) Check(ctx context.Context, q dbutil.Querier) error {
	if err := f.m.Alive(); err != nil {
		return err
	}
	var live bool
	if err := q.QueryRowContext(ctx, `SELECT parley_fence($1)`, f.m.id).Scan(&live); err != nil {
		return fmt.Errorf("check this replica's fence: %w", err)
	}
	if !live {
		f.m.markFenced()
		return ErrFenced
	}
	return nil
}
