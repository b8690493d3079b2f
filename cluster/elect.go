package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrChannelLost is what a channel an Elector stops is told when this
// replica may no longer run it (fenced, or its lease lapsed): it says
// nothing more to its platform. The daemon passes adapters.ErrChannelLost.
var ErrChannelLost = errors.New("the channel is another replica's now")

// ElectorOptions are what an Elector runs channels with.
type ElectorOptions struct {
	// Channels are the ids of the channels one replica at a time runs
	// (those that connect out: polling Telegram, the Discord gateway, a
	// WhatsApp device), read at each election.
	Channels func() []string
	// Start runs the channel id, which this replica now holds, and
	// returns what stops it (with ErrChannelLost, or Lost, when taken away).
	Start func(id string) (stop func(error))
	// Heartbeat is the members' heartbeat, read at each election: a
	// channel free for two is claimed whatever the share.
	Heartbeat func() time.Duration
	// Lost is the error a channel stopped by Lose is told; default
	// ErrChannelLost.
	Lost error
	Log  *slog.Logger
}

// An Elector spreads the elected channels over the live replicas, one
// replica running each, and stops them the moment this replica may no
// longer be theirs.
type Elector struct {
	m *Member
	o ElectorOptions

	elect   sync.Mutex // one election pass at a time
	mu      sync.Mutex
	running map[string]func(error) // the channels this replica holds and runs, and how to stop each
	free    map[string]time.Time   // since when a channel was seen unheld
}

// NewElector elects channels for m.
func NewElector(m *Member, o ElectorOptions) *Elector {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Lost == nil {
		o.Lost = ErrChannelLost
	}
	return &Elector{m: m, o: o, running: map[string]func(error){}, free: map[string]time.Time{}}
}

// Running reports whether this replica runs the channel id.
func (e *Elector) Running(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running[id] != nil
}

// Elect runs this replica's share of the channels: at most its fair share
// (the channels divided by the live replicas, rounded up), claiming free
// ones up to it and handing one back when it has more (a replica joined);
// a channel left free for two heartbeats is claimed whatever the share,
// so none stays unrun.
func (e *Elector) Elect(ctx context.Context) {
	e.elect.Lock()
	defer e.elect.Unlock()
	ids := e.o.Channels()
	if len(ids) == 0 {
		return
	}
	fair := (len(ids) + e.m.LiveCount() - 1) / e.m.LiveCount()
	var mine []string
	for _, id := range ids {
		if e.Running(id) {
			mine = append(mine, id)
		}
	}
	if len(mine) > fair {
		id := mine[len(mine)-1]
		e.mu.Lock()
		stop := e.running[id]
		delete(e.running, id)
		e.mu.Unlock()
		stop(nil)
		if err := e.m.Release(ctx, ChannelHold(id)); err != nil {
			e.o.Log.Warn("hand a channel to another replica; it is taken over once this one's lease lapses", "adapter", id, "error", err)
		} else {
			e.o.Log.Info("channel handed to another replica, to spread the channels over the replicas", "adapter", id, "replicas", e.m.LiveCount())
		}
		return
	}
	held := len(mine)
	for _, id := range ids {
		if e.Running(id) {
			continue
		}
		hold := ChannelHold(id)
		holder, err := e.m.Holder(ctx, hold)
		if err == nil && holder == e.m.ID() {
			// Its own, stopped while its lease had lapsed: run it again.
			delete(e.free, id)
			held++
			e.run(id)
			continue
		}
		if err != nil || holder != "" {
			delete(e.free, id)
			continue // held by a live replica (a read; no write while it lives)
		}
		if _, ok := e.free[id]; !ok {
			e.free[id] = time.Now()
		}
		if held >= fair && time.Since(e.free[id]) < 2*e.o.Heartbeat() {
			continue // this replica has its share; another may take it
		}
		holder, err = e.m.Claim(ctx, hold)
		if err != nil {
			if ctx.Err() == nil {
				e.o.Log.Warn("claim a channel", "adapter", id, "error", err)
			}
			continue
		}
		if holder != e.m.ID() {
			continue
		}
		delete(e.free, id)
		held++
		e.run(id)
	}
}

// run starts the channel id, which this replica holds.
func (e *Elector) run(id string) {
	stop := e.o.Start(id)
	e.mu.Lock()
	e.running[id] = stop
	e.mu.Unlock()
}

// leaseCheck is how often a replica checks that it may still run its
// elected channels.
const leaseCheck = 100 * time.Millisecond

// Watch stops the elected channels the moment this replica may no longer
// be theirs: once fenced, or once its lease lapsed (the database out of
// reach), when the others may fence it and run them any moment. A replica
// that renews its lease in time runs them again (Elect). It returns when
// ctx ends or the replica is fenced.
func (e *Elector) Watch(ctx context.Context) {
	t := time.NewTicker(leaseCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.m.Fenced():
			e.Lose("this replica was fenced")
			return
		case <-t.C:
			if err := e.m.Alive(); err != nil {
				e.Lose("this replica's lease lapsed")
			}
		}
	}
}

// Lose stops every channel this replica runs, saying nothing more to
// their platforms.
func (e *Elector) Lose(why string) {
	e.elect.Lock()
	defer e.elect.Unlock()
	e.mu.Lock()
	running := e.running
	e.running = map[string]func(error){}
	e.mu.Unlock()
	for id, stop := range running {
		stop(e.o.Lost)
		e.o.Log.Warn("channel stopped: "+why+"; the replica holding it runs it", "adapter", id)
	}
}
