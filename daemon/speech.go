package daemon

import (
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/speech"
)

// transcriber is the gateway's transcriber: nil (not a nil pointer in an
// interface) without a provider.
func transcriber(cfg *config.Config) gateway.Transcriber {
	if c := speech.FromConfig(cfg.Speech); c != nil {
		return c
	}
	return nil
}

// speaker speaks replies (agents[].voice_replies, /voice), or is nil when
// no speech provider is set up.
func speaker(cfg *config.Config) gateway.Speaker {
	if c := speech.FromConfig(cfg.Speech); c != nil {
		return c
	}
	return nil
}
