package daemon

import (
	"context"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// openReplicas makes the daemon one replica among those sharing its
// PostgreSQL database (cluster.Node); on SQLite d.replicas stays nil.
func (d *Daemon) openReplicas(cfg *config.Config) {
	g := cfg.Gateway
	d.replicas = cluster.NewNode(d.db, cluster.NodeOptions{
		Member: cluster.Options{Name: g.ReplicaID, Explicit: g.ReplicaIDSet, Lease: g.ReplicaLease.Std(), Heartbeat: g.ReplicaHeartbeat.Std()},
		Configured: func() []string {
			ids := make([]string, len(d.cfg().Adapters))
			for i, a := range d.cfg().Adapters {
				ids[i] = a.ID
			}
			return ids
		},
		Channels: func() []string {
			ids := make([]string, 0, len(d.adapters))
			for id := range d.adapters {
				ids = append(ids, string(id))
			}
			return ids
		},
		CallsIn: func(id string) bool {
			w := d.caps.Of(adapters.ID(id), d.adapters[adapters.ID(id)]).Webhook
			route := ""
			if w != nil {
				route, _ = w.Webhook()
			}
			return route != ""
		},
		Start: func(id string) func(error) {
			d.logStarted("channel", "adapter", id, "elected", true)
			stop := d.startAdapter(adapters.ID(id), d.adapters[adapters.ID(id)])
			d.sender.Wake()
			return stop
		},
		Lost: adapters.ErrChannelLost,
		SessionLane: func(ctx context.Context, id string) (string, error) {
			s, err := d.sessions.Session(ctx, sessions.ID(id))
			if err != nil {
				return "", err
			}
			return gateway.LaneKey(s.Key), nil
		},
		Load:      func() (int, int) { return d.gw.ActiveLanes(), d.gw.QueueDepth() },
		TakeOver:  func(ctx context.Context) { d.gw.TakeOverDead(ctx) },
		Pickup:    func(ctx context.Context) (int, error) { return d.gw.Pickup(ctx) },
		Heartbeat: func() time.Duration { return d.cfg().Gateway.ReplicaHeartbeat.Std() },
		Log:       d.named("replicas"),
	})
}

// storeOptions are the gateway store's options for this daemon.
func (d *Daemon) storeOptions(cfg *config.Config) []gateway.StoreOption {
	if d.replicas == nil {
		return []gateway.StoreOption{gateway.Owner(cfg.Gateway.ReplicaID)}
	}
	return []gateway.StoreOption{gateway.Owner(d.replicas.ID("")), gateway.Cluster(), gateway.ClaimChannels(d.replicas.ClaimChannels)}
}

// runElsewhere reports whether a channel is elected and run by another
// replica, not this one (false without replicas).
func (d *Daemon) runElsewhere(id adapters.ID) bool { return d.replicas.RunElsewhere(string(id)) }

// Replicas lists the live replicas sharing the database (none on SQLite).
func (d *Daemon) Replicas(ctx context.Context) ([]cluster.Replica, error) {
	return d.replicas.Live(ctx)
}

// abortOnHolder stops the running turn of key's session on the replica
// that runs it, when another does (a reset through this one's API).
func (d *Daemon) abortOnHolder(ctx context.Context, key sessions.Key) {
	if d.replicas == nil || len(d.cfg().HTTP.Tokens) == 0 {
		return
	}
	if s, err := d.sessions.Active(ctx, key); err == nil {
		d.replicas.AbortOnHolder(ctx, string(s.ID), d.cfg().HTTP.Tokens[0].Reveal())
	}
}
