package daemon

import (
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/speech"
)

// speechClient is the configured speech provider, or nil when there is
// none.
func speechClient(cfg *config.Config) *speech.Client {
	s := cfg.Speech
	if !s.Enabled() {
		return nil
	}
	return speech.New(speech.Options{BaseURL: s.BaseURL, APIKey: s.APIKey.Reveal(), Model: s.Model, SpeechModel: s.VoiceModel,
		Voice: s.Voice, Language: s.Language, Timeout: s.Timeout.Std(), MaxBytes: int64(s.MaxBytes), MaxSeconds: s.MaxSeconds})
}

// transcriber is the gateway's transcriber: nil (not a nil pointer in an
// interface) without a provider.
func transcriber(cfg *config.Config) gateway.Transcriber {
	if c := speechClient(cfg); c != nil {
		return c
	}
	return nil
}

// speaker speaks replies (agents[].voice_replies, /voice), or is nil when
// no speech provider is set up.
func speaker(cfg *config.Config) gateway.Speaker {
	if c := speechClient(cfg); c != nil {
		return c
	}
	return nil
}
