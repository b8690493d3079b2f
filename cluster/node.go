package cluster

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"log/slog"

	"github.com/parleyd/parley/dbutil"
)

// NodeOptions are what a Node asks of the daemon it is part of. The
// functions are called once the daemon is built, never during NewNode.
type NodeOptions struct {
	Member Options
	// Configured lists the ids of the configured channels (the config's
	// adapters), read at each call.
	Configured func() []string
	// Channels lists every channel the daemon has: the configured ones
	// and its own (the API, webhooks, cron, MCP).
	Channels func() []string
	// CallsIn says whether a channel's platform calls in (Telegram's
	// webhook mode): such a channel runs on every replica, behind the
	// load balancer, and is not elected.
	CallsIn func(id string) bool
	// Start runs channel id, which this replica now holds, and returns
	// what stops it (with Lost when it is taken away).
	Start func(id string) (stop func(error))
	// Lost is the error a channel this replica may no longer run is
	// stopped with (adapters.ErrChannelLost).
	Lost error
	// SessionLane is the lane (gateway.LaneKey) of the session with an
	// id, for the proxy.
	SessionLane func(ctx context.Context, sessionID string) (string, error)
	// Load is the lanes with work and the messages waiting in them, for
	// the heartbeat.
	Load func() (lanes, queued int)
	// TakeOver takes over the work of dead replicas
	// (gateway.TakeOverDead); Pickup picks up the messages other replicas
	// hand this one (gateway.Pickup).
	TakeOver func(ctx context.Context)
	Pickup   func(ctx context.Context) (int, error)
	// Heartbeat is the configured heartbeat, read at each election.
	Heartbeat func() time.Duration
	Log       *slog.Logger
}

// Node is a daemon's part in a cluster of replicas sharing one PostgreSQL:
// who it is, which channels it runs (elected, one replica at a time for
// those that connect out), and the proxy that passes API requests about
// sessions another replica runs to it. A nil *Node is a daemon alone (on
// SQLite): its methods then do what one process alone does.
type Node struct {
	m       *Member
	elector *Elector
	proxy   *Proxy
	o       NodeOptions
	// started says the channels may start: elections wait for it.
	started atomic.Bool
}

// NewNode makes the daemon one replica among those sharing db; nil on
// SQLite, where a daemon is alone.
func NewNode(db *dbutil.DB, o NodeOptions) *Node {
	if db.Dialect != dbutil.Postgres {
		return nil
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	n := &Node{o: o}
	o.Member.Stats = n.stats
	if o.Member.Log == nil {
		o.Member.Log = o.Log
	}
	n.m = New(db, o.Member)
	n.proxy = NewProxy(n.m, func(ctx context.Context, id string) (string, error) {
		lane, err := o.SessionLane(ctx, id)
		if err != nil {
			return "", err
		}
		return LaneHold(lane), nil
	}, o.Log)
	n.elector = NewElector(n.m, ElectorOptions{Channels: n.electedChannels, Start: o.Start, Lost: o.Lost, Log: o.Log,
		Heartbeat: o.Heartbeat})
	return n
}

// ID is this process's unique id among replicas; fallback (the
// configured name) without replicas.
func (n *Node) ID(fallback string) string {
	if n == nil {
		return fallback
	}
	return n.m.ID()
}

// Member is this replica's membership (nil without replicas).
func (n *Node) Member() *Member {
	if n == nil {
		return nil
	}
	return n.m
}

// Place claims a lane for this replica, or names the replica that holds
// it (the gateway's Placement).
func (n *Node) Place(ctx context.Context, lane string) (hold, holder string, here bool, err error) {
	hold = LaneHold(lane)
	holder, err = n.m.Claim(ctx, hold)
	return hold, holder, err == nil && holder == n.m.ID(), err
}

// Alive is the sender's check before each send, with the end of this
// replica's lease, the send's deadline (nil without replicas).
func (n *Node) Alive() func() (time.Time, error) {
	if n == nil {
		return nil
	}
	return n.m.AliveUntil
}

// Elected reports whether one replica at a time runs a channel: the
// configured ones that connect out (polling Telegram, the Discord
// gateway, a WhatsApp device). A channel whose platform calls in runs on
// every replica. Without replicas, no channel is elected.
func (n *Node) Elected(id string) bool {
	if n == nil || !slices.Contains(n.o.Configured(), id) {
		return false
	}
	return !n.o.CallsIn(id)
}

// ClaimChannels are the channels whose replies this replica sends: the
// configured channels it runs, and its own (the API, webhooks, cron),
// whose replies it queued itself.
func (n *Node) ClaimChannels() (held, own []string) {
	configured := n.o.Configured()
	for _, id := range n.o.Channels() {
		switch {
		case !slices.Contains(configured, id):
			own = append(own, id)
		case n.elector.Running(id) || !n.Elected(id):
			held = append(held, id)
		}
	}
	return held, own
}

// RunElsewhere reports whether a channel is elected and run by another
// replica, not this one (false without replicas).
func (n *Node) RunElsewhere(id string) bool {
	if n == nil || !n.Elected(id) {
		return false
	}
	return !n.elector.Running(id)
}

// stats is what this replica's heartbeat reports.
func (n *Node) stats() Stats {
	var st Stats
	st.Adapters = slices.Clone(n.o.Configured())
	st.Channels, _ = n.ClaimChannels()
	slices.Sort(st.Adapters)
	slices.Sort(st.Channels)
	if n.o.Load != nil {
		st.Lanes, st.Queued = n.o.Load()
	}
	return st
}

// Join registers this replica, before recovery: ln is the API's
// listener, whose address the others pass requests to unless advertise
// names one.
func (n *Node) Join(ctx context.Context, advertise string, ln net.Listener, version string) error {
	if n == nil {
		return nil
	}
	n.m.SetAPIURL(advertiseURL(advertise, ln))
	n.m.SetVersion(version)
	return n.m.Join(ctx)
}

// advertiseURL is where the other replicas reach this one's API.
func advertiseURL(advertise string, ln net.Listener) string {
	if advertise != "" {
		return advertise
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

// Run keeps this replica's heartbeat, takes over the work of dead ones,
// runs the channels it is elected to, and picks up the messages other
// replicas hand it, until ctx ends or it is fenced (then Fenced closes).
func (n *Node) Run(ctx context.Context) {
	go n.elector.Watch(ctx)
	go func() {
		err := n.m.db.Listen(ctx, "parley_forward", nil, func(payload string) {
			if payload == n.m.ID() || payload == "" {
				n.pickup(ctx)
			}
		})
		if err != nil && ctx.Err() == nil {
			n.o.Log.Warn("listen for messages handed to this replica; it looks every heartbeat instead", "error", err)
		}
	}()
	_ = n.m.Run(ctx, func(ctx context.Context, takeOver bool) {
		n.Elect(ctx)
		if !takeOver {
			return
		}
		n.o.TakeOver(ctx)
		n.pickup(ctx)
	})
}

func (n *Node) pickup(ctx context.Context) {
	if _, err := n.o.Pickup(ctx); err != nil && ctx.Err() == nil {
		n.o.Log.Warn("pick up the messages handed to this replica", "error", err)
	}
}

// StartChannels lets the channels start, and runs this replica's share
// of the elected ones.
func (n *Node) StartChannels(ctx context.Context) {
	if n == nil {
		return
	}
	n.started.Store(true)
	n.Elect(ctx)
}

// Elect runs this replica's share of the elected channels, once the
// channels may start.
func (n *Node) Elect(ctx context.Context) {
	if n.started.Load() {
		n.elector.Elect(ctx)
	}
}

// electedChannels are the ids of the channels one replica at a time runs.
func (n *Node) electedChannels() []string {
	var ids []string
	for _, id := range n.o.Channels() {
		if n.Elected(id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// LoseChannels stops every elected channel this replica runs.
func (n *Node) LoseChannels(why string) {
	if n != nil {
		n.elector.Lose(why)
	}
}

// Fenced is closed once this replica must stop at once: fenced by the
// others (its work is theirs now), as its heartbeat or a refused write
// found. Nil (never) without replicas.
func (n *Node) Fenced() <-chan struct{} {
	if n == nil {
		return nil
	}
	return n.m.Fenced()
}

// Leave frees this replica's sessions and channels at a clean stop.
func (n *Node) Leave(ctx context.Context) {
	if n == nil {
		return
	}
	if err := n.m.Leave(ctx); err != nil {
		n.o.Log.Warn("leave the replicas; the others take this one's sessions over once its lease lapses", "error", err)
	}
}

// Live lists the live replicas sharing the database (none without
// replicas).
func (n *Node) Live(ctx context.Context) ([]Replica, error) {
	if n == nil {
		return nil, nil
	}
	return n.m.Live(ctx)
}

// Gauges are what the metrics show of the replicas: how many are live,
// how many channels this one holds, and whether it was fenced (all zero
// without replicas).
func (n *Node) Gauges(ctx context.Context) (live, held int, fenced bool, err error) {
	if n == nil {
		return 0, 0, false, nil
	}
	list, err := n.m.Live(ctx)
	h, _ := n.ClaimChannels()
	return len(list), len(h), errors.Is(n.m.Alive(), ErrFenced), err
}

// ToHolder passes an authenticated API request about a session another
// replica runs to that replica (Proxy); without replicas it only removes
// a client's hop header.
func (n *Node) ToHolder(next http.Handler) http.Handler {
	if n == nil {
		return StripHop(next)
	}
	return n.proxy.Handler(next)
}

// AbortOnHolder stops the running turn of a session on the replica that
// runs it, when another does (a reset through this one's API), with
// token, one of the replicas' API tokens.
func (n *Node) AbortOnHolder(ctx context.Context, sessionID, token string) {
	if n != nil {
		n.proxy.Abort(ctx, sessionID, token)
	}
}
