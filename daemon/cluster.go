package daemon

import (
	"context"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// replicas is the daemon's part in a cluster of replicas sharing one
// PostgreSQL (nil on SQLite): who it is, and which channels it runs.
type replicas struct {
	m *cluster.Member
	// elector runs this replica's share of the elected channels.
	elector *cluster.Elector
	// proxy passes API requests about sessions others run to them.
	proxy *cluster.Proxy
}

// openReplicas makes the daemon one replica among those sharing its
// PostgreSQL database; on SQLite it does nothing.
func (d *Daemon) openReplicas(cfg *config.Config) {
	if d.db.Dialect != dbutil.Postgres {
		return
	}
	g := cfg.Gateway
	d.replicas = &replicas{
		m: cluster.New(d.db, cluster.Options{Name: g.ReplicaID, Explicit: g.ReplicaIDSet, Lease: g.ReplicaLease.Std(),
			Heartbeat: g.ReplicaHeartbeat.Std(), Log: d.named("replicas"), Stats: d.replicaStats})}
	d.replicas.proxy = cluster.NewProxy(d.replicas.m, func(ctx context.Context, id string) (string, error) {
		s, err := d.sessions.Session(ctx, sessions.ID(id))
		if err != nil {
			return "", err
		}
		return cluster.LaneHold(gateway.LaneKey(s.Key)), nil
	}, d.named("replicas"))
	d.replicas.elector = cluster.NewElector(d.replicas.m, cluster.ElectorOptions{
		Channels: d.electedChannels, Start: d.runElected, Lost: adapters.ErrChannelLost, Log: d.named("replicas"),
		Heartbeat: func() time.Duration { return d.cfg().Gateway.ReplicaHeartbeat.Std() }})
}

// replicaID is this process's name among replicas: its unique id on
// PostgreSQL, the configured name otherwise.
func (d *Daemon) replicaID(cfg *config.Config) string {
	if d.replicas == nil {
		return cfg.Gateway.ReplicaID
	}
	return d.replicas.m.ID()
}

// storeOptions are the gateway store's options for this daemon.
func (d *Daemon) storeOptions(cfg *config.Config) []gateway.StoreOption {
	if d.replicas == nil {
		return []gateway.StoreOption{gateway.Owner(cfg.Gateway.ReplicaID)}
	}
	return []gateway.StoreOption{gateway.Owner(d.replicas.m.ID()), gateway.Cluster(), gateway.ClaimChannels(d.claimChannels)}
}

// placement is the gateway's gateway.Placement among replicas.
type placement struct{ m *cluster.Member }

func (p placement) Place(ctx context.Context, lane string) (hold, holder string, here bool, err error) {
	hold = cluster.LaneHold(lane)
	holder, err = p.m.Claim(ctx, hold)
	return hold, holder, err == nil && holder == p.m.ID(), err
}

// replicaAlive is the sender's check before each send (nil without
// replicas).
func (d *Daemon) replicaAlive() func() (time.Time, error) {
	if d.replicas == nil {
		return nil
	}
	return d.replicas.m.AliveUntil
}

// gatewayPlacement is nil without replicas.
func (d *Daemon) gatewayPlacement() gateway.Placement {
	if d.replicas == nil {
		return nil
	}
	return placement{d.replicas.m}
}

// elected reports whether one replica at a time runs a channel: those
// that connect out (polling Telegram, the Discord gateway, a WhatsApp
// device). A channel whose platform calls in (Telegram's webhook mode)
// runs on every replica, behind the load balancer.
func (d *Daemon) elected(id adapters.ID) bool {
	if !slices.ContainsFunc(d.cfg().Adapters, func(a config.Adapter) bool { return adapters.ID(a.ID) == id }) {
		return false
	}
	if w := d.caps.Of(id, d.adapters[id]).Webhook; w != nil {
		if route, _ := w.Webhook(); route != "" {
			return false
		}
	}
	return true
}

// claimChannels are the channels whose replies this replica sends: the
// configured channels it runs, and its own (the API, webhooks, cron),
// whose replies it queued itself.
func (d *Daemon) claimChannels() (held, own []string) {
	configured := map[string]bool{}
	for _, a := range d.cfg().Adapters {
		configured[a.ID] = true
	}
	for id := range d.adapters {
		switch {
		case !configured[string(id)]:
			own = append(own, string(id))
		case d.replicas.elector.Running(string(id)) || !d.elected(id):
			held = append(held, string(id))
		}
	}
	return held, own
}

// runElsewhere reports whether a channel is elected and run by another
// replica, not this one (false without replicas).
func (d *Daemon) runElsewhere(id adapters.ID) bool {
	if d.replicas == nil || !d.elected(id) {
		return false
	}
	return !d.replicas.elector.Running(string(id))
}

// replicaStats is what this replica's heartbeat reports.
func (d *Daemon) replicaStats() cluster.Stats {
	var st cluster.Stats
	for _, a := range d.cfg().Adapters {
		st.Adapters = append(st.Adapters, a.ID)
	}
	held, _ := d.claimChannels()
	st.Channels = held
	slices.Sort(st.Adapters)
	slices.Sort(st.Channels)
	if d.gw != nil {
		st.Lanes, st.Queued = d.gw.ActiveLanes(), d.gw.QueueDepth()
	}
	return st
}

// joinReplicas registers this replica, before recovery: ln is the API's
// listener, whose address the others pass requests to.
func (d *Daemon) joinReplicas(ctx context.Context, ln net.Listener) error {
	r := d.replicas
	if r == nil {
		return nil
	}
	r.m.SetAPIURL(advertiseURL(d.cfg(), ln))
	r.m.SetVersion(d.version)
	if err := r.m.Join(ctx); err != nil {
		return err
	}
	d.logStarted("replica", "replica", r.m.ID(), "lease", d.cfg().Gateway.ReplicaLease.Std())
	return nil
}

// advertiseURL is where the other replicas reach this one's API.
func advertiseURL(cfg *config.Config, ln net.Listener) string {
	if u := cfg.Gateway.AdvertiseURL; u != "" {
		return u
	}
	if ln == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// runReplicas keeps this replica's heartbeat, takes over the work of dead
// ones, runs the channels it is elected to, and picks up the messages
// other replicas hand it, until ctx ends or it is fenced.
func (d *Daemon) runReplicas(ctx context.Context) {
	r := d.replicas
	go r.elector.Watch(ctx)
	go func() {
		err := d.db.Listen(ctx, "parley_forward", nil, func(payload string) {
			if payload == r.m.ID() || payload == "" {
				d.pickup(ctx)
			}
		})
		if err != nil && ctx.Err() == nil {
			d.log.Warn("listen for messages handed to this replica; it looks every heartbeat instead", "error", err)
		}
	}()
	// Run ends with ErrFenced, which closes the member's Fenced: Run
	// (the daemon's) watches that.
	_ = r.m.Run(ctx, func(ctx context.Context, takeOver bool) {
		d.electChannels(ctx)
		if !takeOver {
			return
		}
		n, err := d.gw.TakeOver(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("take over the messages of a dead replica", "error", err)
		}
		if n > 0 {
			d.log.Info("took over the messages of a dead replica", "count", n)
		}
		if n, err := d.store.Reclaim(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("take back the replies a dead replica claimed", "error", err)
		} else if n > 0 {
			d.log.Info("took back the replies a dead replica claimed and never recorded; each may reach its chat twice", "count", n)
			d.metrics.OutboxReclaimed(n)
			d.sender.Wake()
		}
		d.pickup(ctx)
	})
}

func (d *Daemon) pickup(ctx context.Context) {
	if _, err := d.gw.Pickup(ctx); err != nil && ctx.Err() == nil {
		d.log.Warn("pick up the messages handed to this replica", "error", err)
	}
}

// electChannels runs this replica's share of the elected channels, once
// the channels may start.
func (d *Daemon) electChannels(ctx context.Context) {
	if d.adapterCtx != nil {
		d.replicas.elector.Elect(ctx)
	}
}

// electedChannels are the ids of the channels one replica at a time runs.
func (d *Daemon) electedChannels() []string {
	var ids []string
	for id := range d.adapters {
		if d.elected(id) {
			ids = append(ids, string(id))
		}
	}
	slices.Sort(ids)
	return ids
}

// runElected starts the elected channel id, which this replica holds.
func (d *Daemon) runElected(id string) func(error) {
	d.logStarted("channel", "adapter", id, "elected", true)
	stop := d.startAdapter(adapters.ID(id), d.adapters[adapters.ID(id)])
	d.sender.Wake()
	return stop
}

// loseChannels stops every elected channel this replica runs.
func (d *Daemon) loseChannels(why string) {
	if d.replicas != nil {
		d.replicas.elector.Lose(why)
	}
}

// fenced is closed once this replica must stop at once: fenced by the
// others (its work is theirs now), as its heartbeat or a refused write
// found. Nil (never) without replicas.
func (d *Daemon) fenced() <-chan struct{} {
	if d.replicas == nil {
		return nil
	}
	return d.replicas.m.Fenced()
}

// leaveReplicas frees this replica's sessions and channels at a clean
// stop.
func (d *Daemon) leaveReplicas(ctx context.Context) {
	if d.replicas == nil {
		return
	}
	if err := d.replicas.m.Leave(ctx); err != nil {
		d.log.Warn("leave the replicas; the others take this one's sessions over once its lease lapses", "error", err)
	}
}

// Replicas lists the live replicas sharing the database (none on SQLite).
func (d *Daemon) Replicas(ctx context.Context) ([]cluster.Replica, error) {
	if d.replicas == nil {
		return nil, nil
	}
	return d.replicas.m.Live(ctx)
}

// toHolder passes an authenticated API request about a session another
// replica runs to that replica (cluster.Proxy); without replicas it only
// removes a client's hop header.
func (d *Daemon) toHolder(next http.Handler) http.Handler {
	if d.replicas == nil {
		return cluster.StripHop(next)
	}
	return d.replicas.proxy.Handler(next)
}

// abortOnHolder stops the running turn of key's session on the replica
// that runs it, when another does (a reset through this one's API).
func (d *Daemon) abortOnHolder(ctx context.Context, key sessions.Key) {
	if d.replicas == nil || len(d.cfg().HTTP.Tokens) == 0 {
		return
	}
	if s, err := d.sessions.Active(ctx, key); err == nil {
		d.replicas.proxy.Abort(ctx, string(s.ID), d.cfg().HTTP.Tokens[0].Reveal())
	}
}
