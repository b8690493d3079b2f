package events

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestSubscriberGetsMatchingEventsInOrder(t *testing.T) {
	b := New()
	all := b.Subscribe()
	only := b.Subscribe("a")
	defer all.Close()
	defer only.Close()
	for i, typ := range []Type{"a", "b", "a"} {
		b.Publish(Event{Type: typ, Data: i})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, want := range []int{0, 1, 2} {
		e, err := all.Next(ctx)
		if err != nil || e.Data != want {
			t.Fatalf("all: got %v %v, want data %d", e, err, want)
		}
	}
	for _, want := range []int{0, 2} {
		e, err := only.Next(ctx)
		if err != nil || e.Data != want || e.Type != "a" {
			t.Fatalf("filtered: got %v %v, want a/%d", e, err, want)
		}
	}
	if only.Pending() != 0 {
		t.Fatalf("filtered subscription has %d extra events", only.Pending())
	}
}

// A subscriber that never reads must not block publishers or lose events.
func TestSlowSubscriberLosesNothing(t *testing.T) {
	b := New()
	s := b.Subscribe()
	defer s.Close()
	const n = 10000
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/4; i++ {
				b.Publish(Event{Type: "x"})
			}
		}()
	}
	wg.Wait()
	if got := s.Pending(); got != n {
		t.Fatalf("pending = %d, want %d", got, n)
	}
}

func TestNextEndsOnCloseAndContext(t *testing.T) {
	b := New()
	s := b.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on cancelled ctx: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Next(context.Background())
		done <- err
	}()
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Next after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after Close")
	}
	b.Publish(Event{Type: "late"}) // must not panic or queue
	if s.Pending() != 0 {
		t.Fatal("closed subscription still receives events")
	}
	var nilBus *Bus
	nilBus.Publish(Event{Type: "x"})
}

// An observer sees its types as they are published, from many publishers
// one call at a time, and nothing once stopped.
func TestObserverSeesEventsAsPublished(t *testing.T) {
	b := New()
	var got []any
	inCall := false
	stop := b.Observe(func(e Event) {
		if inCall {
			t.Error("two observer calls at once")
		}
		inCall = true
		got = append(got, e.Data)
		inCall = false
	}, "a")
	b.Publish(Event{Type: "a", Data: 1})
	b.Publish(Event{Type: "b", Data: 2})
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("observed %v right after publishing; want [1]", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Publish(Event{Type: "a", Data: 0})
			}
		}()
	}
	wg.Wait()
	if len(got) != 801 {
		t.Fatalf("observed %d events, want 801", len(got))
	}
	stop()
	b.Publish(Event{Type: "a", Data: 3})
	if len(got) != 801 {
		t.Fatal("an event reached a stopped observer")
	}
}
