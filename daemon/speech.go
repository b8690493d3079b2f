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
