package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// SessionHook posts a session's lifecycle events to an integrator's URL:
// signed, at least once, in order per session.
type SessionHook struct {
	// URL receives the events (http or https).
	URL string `yaml:"url"`
	// Secret signs each POST (X-Parley-Timestamp, X-Parley-Signature), as
	// reply callbacks are signed.
	Secret Secret `yaml:"secret"`
	// Events are the events posted; empty means all of SessionHookEvents.
	Events []string `yaml:"events"`
	// Agents limits the hook to these agents' sessions; empty means all.
	Agents []string `yaml:"agents"`
	// SyncTimeout, when set, posts message.user before the message is
	// stored and waits this long for the answer, whose snapshot_id is
	// kept in the message's metadata; 0 queues it like the rest.
	SyncTimeout Duration `yaml:"sync_timeout"`
}

// SessionHookEvents are the events a session hook may post.
var SessionHookEvents = []string{"session.created", "session.reset", "session.archived", "session.deleted", "session.compacted", "message.user"}

// Wants reports whether the hook posts event for a session of agent.
func (h SessionHook) Wants(event, agent string) bool {
	return (len(h.Events) == 0 || slices.Contains(h.Events, event)) && (len(h.Agents) == 0 || agent == "" || slices.Contains(h.Agents, agent))
}

// checkSessionHooks reports the session hooks' problems.
func (c *Config) checkSessionHooks(ck *checker) {
	for i := range c.SessionHooks {
		h := &c.SessionHooks[i]
		p := fmt.Sprintf("session_hooks[%d].", i)
		h.URL = strings.TrimSpace(h.URL)
		if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ck.add(p+"url", fmt.Sprintf("%q is not an http:// or https:// URL; give the address that receives the events", RedactURL(h.URL)))
		}
		if s := h.Secret.Reveal(); s == "" {
			ck.add(p+"secret", "is empty; every event is signed with it: set one made with openssl rand -hex 32, such as ${PARLEY_HOOK_SECRET}")
		} else if msg := weakSecret(s, "PARLEY_HOOK_SECRET"); msg != "" {
			ck.add(p+"secret", msg)
		}
		for j, e := range h.Events {
			if !slices.Contains(SessionHookEvents, e) {
				ck.add(fmt.Sprintf("%sevents[%d]", p, j), fmt.Sprintf("%q is not an event; use %s", e, strings.Join(SessionHookEvents, ", ")))
			}
		}
		for j, a := range h.Agents {
			if _, ok := c.Agent(a); !ok {
				ck.add(fmt.Sprintf("%sagents[%d]", p, j), fmt.Sprintf("%q is not an agent; name one of agents[].id", a))
			}
		}
		switch d := h.SyncTimeout.Std(); {
		case d < 0 || d > time.Minute:
			ck.add(p+"sync_timeout", fmt.Sprintf(`%s is out of range; use 0 (queue message.user like the rest) or up to 1m, such as "3s" (the message waits for it)`, h.SyncTimeout))
		case d > 0 && len(h.Events) > 0 && !slices.Contains(h.Events, "message.user"):
			ck.add(p+"sync_timeout", "applies to message.user, which events leaves out; add it, or drop sync_timeout")
		}
		if len(h.Events) == 0 {
			h.Events = nil
		}
		if len(h.Agents) == 0 {
			h.Agents = nil
		}
	}
}
