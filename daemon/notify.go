package daemon

import (
	"context"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/webhooks"
)

// notify sends text from a hook or a job to a target, "<adapter id>:<chat
// id>", under key: a note, through the gateway.
func (d *Daemon) notify(ctx context.Context, target, text, key string) error {
	return d.gw.Notify(ctx, target, text, key)
}

// queueNote queues a note in q, the transaction that stores the reply of
// the run that sends it.
func (d *Daemon) queueNote(ctx context.Context, q dbutil.Querier, target, text, key string, files ...adapters.OutFile) error {
	return d.gw.QueueNote(ctx, q, target, text, key, files...)
}

var (
	_ gateway.Reporter = (*cron.Scheduler)(nil)
	_ gateway.Reporter = (*webhooks.Server)(nil)
)
