package adapters_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
)

type plain struct{}

func (plain) Start(ctx context.Context, _ adapters.Sink) error { <-ctx.Done(); return nil }
func (plain) Send(context.Context, adapters.Outbound) (adapters.Sent, error) {
	return adapters.Sent{}, nil
}

type rich struct{ plain }

func (rich) MaxMessageLength() int                              { return 4096 }
func (rich) Edit(context.Context, string, string, string) error { return nil }
func (rich) StreamEvery() time.Duration                         { return time.Second }
func (rich) Typing(context.Context, string) error               { return nil }
func (rich) Fetch(context.Context, adapters.FileRef, int64) ([]byte, string, error) {
	return nil, "", nil
}

// A channel's capabilities are read from what it implements, once.
func TestCapabilitiesOf(t *testing.T) {
	if c := adapters.CapabilitiesOf(plain{}); c.MaxMessageLength != 0 || c.Edit != nil || c.Typing != nil || c.Fetch != nil || c.Choices != nil {
		t.Fatalf("a plain channel's capabilities: %+v", c)
	}
	c := adapters.CapabilitiesOf(rich{})
	if c.MaxMessageLength != 4096 || c.Edit == nil || c.StreamEvery != time.Second || c.Typing == nil || c.Fetch == nil || c.Choices != nil || c.Webhook != nil {
		t.Fatalf("a rich channel's capabilities: %+v", c)
	}
	var cache adapters.CapabilityCache
	if got := cache.Of("tg", rich{}); got.MaxMessageLength != 4096 {
		t.Fatalf("cached: %+v", got)
	}
	if got := cache.Of("tg", plain{}); got.MaxMessageLength != 4096 {
		t.Fatal("the cache read a channel's capabilities twice")
	}
	if got := cache.Of("none", nil); got.Edit != nil {
		t.Fatalf("no channel: %+v", got)
	}
}
