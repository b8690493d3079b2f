// Package events is parley's in-process event bus. Producers publish after
// their change is committed; each subscriber pulls from a queue of its own,
// so a slow subscriber neither blocks a producer nor loses an event. A
// subscriber that stops reading holds its queue in memory until it closes,
// so every subscriber must read or Close. Events from one goroutine arrive
// in the order published; events from concurrent producers may interleave
// (message events carry their seq for ordering).
package events

import (
	"context"
	"sync"
	"time"
)

// Type names an event, dot-separated: "session.created".
type Type string

// Event is one thing that happened.
type Event struct {
	Type      Type
	SessionID string
	At        time.Time
	Data      any
}

// Bus fans events out to subscribers. The zero value is not usable; call New.
type Bus struct {
	mu        sync.Mutex
	subs      map[*Subscription]struct{}
	observers map[*observer]struct{}
}

// observer is a function Observe registered.
type observer struct {
	types map[Type]bool
	fn    func(Event)
}

// typeSet is types as a set; nil (every type) when there are none.
func typeSet(types []Type) map[Type]bool {
	if len(types) == 0 {
		return nil
	}
	set := make(map[Type]bool, len(types))
	for _, t := range types {
		set[t] = true
	}
	return set
}

// New returns an empty bus.
func New() *Bus {
	return &Bus{subs: make(map[*Subscription]struct{}), observers: make(map[*observer]struct{})}
}

// Observe calls fn with each event of types (every event, when it names
// none) as it is published: on the publisher's goroutine, inside Publish,
// one call at a time across the bus, so fn needs no lock of its own and
// nothing queues. fn must be quick, must not block, and must not publish.
// It suits bookkeeping such as counters; a consumer that does real work
// should Subscribe. stop ends the calls; once it returns, none is under way.
func (b *Bus) Observe(fn func(Event), types ...Type) (stop func()) {
	o := &observer{fn: fn, types: typeSet(types)}
	b.mu.Lock()
	b.observers[o] = struct{}{}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.observers, o)
		b.mu.Unlock()
	}
}

// Subscription receives the events of the types it asked for (all, when it
// named none), in publish order.
type Subscription struct {
	bus    *Bus
	types  map[Type]bool
	mu     sync.Mutex
	queue  []Event
	ready  chan struct{} // holds a token while queue is non-empty
	closed chan struct{}
	once   sync.Once
}

// Subscribe starts a subscription. Close it when done.
func (b *Bus) Subscribe(types ...Type) *Subscription {
	s := &Subscription{
		bus:    b,
		types:  typeSet(types),
		ready:  make(chan struct{}, 1),
		closed: make(chan struct{}),
	}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Publish hands e to every matching observer and queues it for every
// matching subscriber. It never blocks on a subscriber. A nil bus drops the
// event, so producers need no nil checks.
func (b *Bus) Publish(e Event) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for o := range b.observers {
		if o.types == nil || o.types[e.Type] {
			o.fn(e)
		}
	}
	for s := range b.subs {
		if s.types == nil || s.types[e.Type] {
			s.push(e)
		}
	}
}

func (s *Subscription) push(e Event) {
	s.mu.Lock()
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Next returns the next event, waiting until one arrives, ctx ends or the
// subscription is closed (then it returns ErrClosed).
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			e := s.queue[0]
			s.queue[0] = Event{}
			s.queue = s.queue[1:]
			if len(s.queue) > 0 {
				select {
				case s.ready <- struct{}{}:
				default:
				}
			}
			s.mu.Unlock()
			return e, nil
		}
		s.mu.Unlock()
		select {
		case <-s.ready:
		case <-s.closed:
			return Event{}, ErrClosed
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Pending reports how many events wait to be read.
func (s *Subscription) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Close ends the subscription; queued events are dropped.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.bus.mu.Lock()
		delete(s.bus.subs, s)
		s.bus.mu.Unlock()
		close(s.closed)
	})
}
