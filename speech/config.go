package speech

import "github.com/parleyd/parley/config"

// FromConfig is the client of the configured speech provider (the
// speech section), or nil when there is none.
func FromConfig(s config.Speech) *Client {
	if !s.Enabled() {
		return nil
	}
	return New(Options{BaseURL: s.BaseURL, APIKey: s.APIKey.Reveal(), Model: s.Model, SpeechModel: s.VoiceModel,
		Voice: s.Voice, Language: s.Language, Timeout: s.Timeout.Std(), MaxBytes: int64(s.MaxBytes), MaxSeconds: s.MaxSeconds})
}
