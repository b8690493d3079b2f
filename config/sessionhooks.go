package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
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
var SessionHookEvents = []string{"session.created", "session.reset", "session.archived", "session.unarchived", "session.deleted", "session.compacted", "message.user"}

// Wants reports whether the hook posts event for a session of agent.
func (h SessionHook) Wants(event, agent string) bool {
	return (len(h.Events) == 0 || slices.Contains(h.Events, event)) && (len(h.Agents) == 0 || agent == "" || slices.Contains(h.Agents, agent))
}

// SetDefaults trims the hook's URL and drops its empty lists.
func (h *SessionHook) SetDefaults(section.Set) {
	h.URL = strings.TrimSpace(h.URL)
	if len(h.Events) == 0 {
		h.Events = nil
	}
	if len(h.Agents) == 0 {
		h.Agents = nil
	}
}

// Check reports the session hook's own problems; the agents it names are
// the root's to check.
func (h SessionHook) Check(r section.Reporter) {
	if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.Add("url", fmt.Sprintf("%q is not an http:// or https:// URL; give the address that receives the events", RedactURL(h.URL)))
	}
	if s := h.Secret.Reveal(); s == "" {
		r.Add("secret", "is empty; every event is signed with it: set one made with openssl rand -hex 32, such as ${PARLEY_HOOK_SECRET}")
	} else if msg := weakSecret(s, "PARLEY_HOOK_SECRET"); msg != "" {
		r.Add("secret", msg)
	}
	for j, e := range h.Events {
		if !slices.Contains(SessionHookEvents, e) {
			r.Add(fmt.Sprintf("events[%d]", j), fmt.Sprintf("%q is not an event; use %s", e, strings.Join(SessionHookEvents, ", ")))
		}
	}
	switch d := h.SyncTimeout.Std(); {
	case d < 0 || d > time.Minute:
		r.Add("sync_timeout", fmt.Sprintf(`%s is out of range; use 0 (queue message.user like the rest) or up to 1m, such as "3s" (the message waits for it)`, h.SyncTimeout))
	case d > 0 && len(h.Events) > 0 && !slices.Contains(h.Events, "message.user"):
		r.Add("sync_timeout", "applies to message.user, which events leaves out; add it, or drop sync_timeout")
	}
}

// checkSessionHookAgents reports the agents session hooks name that are
// not there.
func (c *Config) checkSessionHookAgents(ck *checker) {
	for i, h := range c.SessionHooks {
		for j, a := range h.Agents {
			if _, ok := c.Agent(a); !ok {
				ck.add(fmt.Sprintf("session_hooks[%d].agents[%d]", i, j), fmt.Sprintf("%q is not an agent; name one of agents[].id", a))
			}
		}
	}
}
