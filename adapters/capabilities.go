package adapters

import (
	"sync"
	"time"
)

// Capabilities are what a channel can do beyond Start and Send, found once
// from the optional interfaces it implements, as mautrix's bridges state
// theirs: the gateway and the turn ask this summary, not the interfaces.
// A nil field is a thing the channel can't do.
type Capabilities struct {
	// MaxMessageLength is the longest text one message may carry, in
	// characters; 0 is no limit.
	MaxMessageLength int
	// Edit edits a sent message: how a reply streams as it is written.
	Edit Editor
	// StreamEvery is how often a streamed reply may be edited; 0 is the
	// gateway's own pace.
	StreamEvery time.Duration
	// Typing shows that the bot is writing.
	Typing Typer
	// Choices sends a message with buttons (permission questions).
	Choices Chooser
	// React puts a reaction on a person's message and takes it away
	// (ack_reaction).
	React Reactor
	// Fetch downloads a file a message referred to.
	Fetch Fetcher
	// Files sends files (a reply's attachments).
	Files FileSender
	// Check says whether the channel's credentials work, without starting.
	Check Checker
	// Webhook, for a channel that takes its updates over HTTP, is what
	// parley's server mounts.
	Webhook WebhookHandler
}

// CapabilitiesOf reads a's capabilities from the interfaces it implements.
func CapabilitiesOf(a Adapter) Capabilities {
	var c Capabilities
	if a == nil {
		return c
	}
	if l, ok := a.(Limiter); ok {
		c.MaxMessageLength = l.MaxMessageLength()
	}
	c.Edit, _ = a.(Editor)
	if p, ok := a.(StreamPacer); ok {
		c.StreamEvery = p.StreamEvery()
	}
	c.Typing, _ = a.(Typer)
	c.Choices, _ = a.(Chooser)
	c.React, _ = a.(Reactor)
	c.Fetch, _ = a.(Fetcher)
	c.Files, _ = a.(FileSender)
	c.Check, _ = a.(Checker)
	c.Webhook, _ = a.(WebhookHandler)
	return c
}

// CapabilityCache remembers each channel's capabilities by its id, so they
// are read once, on first use.
type CapabilityCache struct {
	m sync.Map // ID -> Capabilities
}

// Of is the capabilities of a, the channel called id.
func (c *CapabilityCache) Of(id ID, a Adapter) Capabilities {
	if a == nil {
		return Capabilities{}
	}
	if v, ok := c.m.Load(id); ok {
		return v.(Capabilities)
	}
	caps := CapabilitiesOf(a)
	c.m.Store(id, caps)
	return caps
}
