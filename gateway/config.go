package gateway

import (
	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/speech"
)

// The gateway's part of the config: each agent's queue mode, session
// policy and allowed models, and each channel's access policy.

// AgentsOf are the config's agents as the gateway sees them: queue modes and
// session policies.
func AgentsOf(cfg *config.Config) []Agent {
	agents := make([]Agent, len(cfg.Agents))
	for i, a := range cfg.Agents {
		hour, daily := a.DailyReset()
		agents[i] = Agent{ID: a.ID, Mode: Mode(a.QueueMode), Models: a.AllowedModels(), Effort: a.ReasoningEffort, Policy: sessions.Policy{
			IdleTimeout: a.IdleTimeout(), DailyReset: daily, DailyResetHour: hour, Location: a.Location()}}
	}
	return agents
}

// AccessOf is each configured channel's access policy.
func AccessOf(cfg *config.Config) map[adapters.ID]Access {
	out := map[adapters.ID]Access{}
	for _, a := range cfg.Adapters {
		allow := map[string]bool{}
		for _, u := range a.Allow {
			allow[u] = true
		}
		groups := map[string]bool{}
		for _, g := range a.Groups.Allow {
			groups[g] = true
		}
		out[adapters.ID(a.ID)] = Access{DM: DMPolicy(a.DMPolicy), Group: GroupPolicy(a.GroupPolicy), Allow: allow,
			Groups: GroupsPolicy(a.Groups.Policy), AllowGroups: groups, AckReaction: a.AckReaction}
	}
	return out
}

// ConfigRoutes route by the running config, read at each message (so a
// reload changes them): route is the agent of a message's binding,
// workspace its workspace, and surface a configured channel's type
// (telegram), or "" for a source of the daemon's own.
func ConfigRoutes(running func() *config.Config) (route, workspace func(adapters.Inbound) string, surface func(adapters.ID) string) {
	route = func(in adapters.Inbound) string { return running().Route(string(in.Adapter), in.ChatID, in.UserID) }
	workspace = func(in adapters.Inbound) string {
		_, ws := running().RouteTo(string(in.Adapter), in.ChatID, in.UserID)
		return ws
	}
	surface = func(id adapters.ID) string {
		for _, a := range running().Adapters {
			if a.ID == string(id) {
				return a.Type
			}
		}
		return ""
	}
	return route, workspace, surface
}

// ChannelsOf are the channels lookup finds, as the gateway sees them;
// which of them stream their replies, cfg says.
func ChannelsOf(cfg *config.Config, lookup func(adapters.ID) (adapters.Adapter, bool)) Channels {
	streams := map[adapters.ID]bool{}
	for _, a := range cfg.Adapters {
		streams[adapters.ID(a.ID)] = a.Stream
	}
	return channelSet{lookup: lookup, streams: streams}
}

// channelSet is ChannelsOf's.
type channelSet struct {
	lookup  func(adapters.ID) (adapters.Adapter, bool)
	streams map[adapters.ID]bool // channels whose replies show as they are written
}

func (c channelSet) Adapter(id adapters.ID) (adapters.Adapter, bool) { return c.lookup(id) }

// Streams says whether id's replies show as they are written: the config
// says for a configured channel; a channel of the daemon's own (the
// terminal) says for itself.
func (c channelSet) Streams(id adapters.ID) bool {
	a, _ := c.lookup(id)
	if s, ok := a.(interface{ Streams() bool }); ok {
		return s.Streams()
	}
	return c.streams[id]
}

// SpeechOf is the speech provider cfg sets up, as the gateway's
// transcriber and the sender's speaker: both nil (not nil pointers in
// interfaces) without one.
func SpeechOf(cfg *config.Config) (Transcriber, Speaker) {
	if c := speech.FromConfig(cfg.Speech); c != nil {
		return c, c
	}
	return nil, nil
}
