package daemon

import (
	"context"

	"github.com/parleyd/parley/dbutil"
)

// notify sends text from a hook or a job to a target, "<adapter id>:<chat
// id>", under key: a note, through the gateway.
func (d *Daemon) notify(ctx context.Context, target, text, key string) error {
	return d.gw.Notify(ctx, target, text, key)
}

// queueNote queues a note in q, the transaction that stores the reply of
// the run that sends it.
func (d *Daemon) queueNote(ctx context.Context, q dbutil.Querier, target, text, key string) error {
	return d.gw.QueueNote(ctx, q, target, text, key)
}
