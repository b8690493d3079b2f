package speech

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/secret"
)

// Config is the speech section of parley's config: an OpenAI-compatible
// audio API that transcribes voice notes and, for spoken replies, speaks.
// Without a base_url voice notes reach the agent as files, untranscribed.
type Config struct {
	// BaseURL is the API root: "https://api.openai.com/v1",
	// "https://api.groq.com/openai/v1", or a local whisper server's.
	BaseURL string        `yaml:"base_url"`
	APIKey  secret.String `yaml:"api_key"`
	// Model transcribes (whisper-1, whisper-large-v3, ...).
	Model string `yaml:"model"`
	// Language is an ISO-639-1 code, or "" (auto) to let the model tell.
	Language string `yaml:"language"`
	// MaxBytes and MaxSeconds cap the voice notes transcribed.
	MaxBytes   int `yaml:"max_bytes"`
	MaxSeconds int `yaml:"max_seconds"`
	// Timeout bounds each call to the provider.
	Timeout section.Duration `yaml:"timeout"`
	// VoiceModel and Voice speak replies (agents[].voice_replies).
	VoiceModel string `yaml:"voice_model"`
	Voice      string `yaml:"voice"`
}

// Enabled reports whether a provider is configured.
func (s Config) Enabled() bool { return s.BaseURL != "" }

// SetDefaults fills in the section's absent settings: the client's own
// defaults (Options).
func (s *Config) SetDefaults(set section.Set) {
	s.BaseURL = strings.TrimRight(strings.TrimSpace(s.BaseURL), "/")
	s.APIKey = secret.String(strings.TrimSpace(string(s.APIKey)))
	s.Language = strings.TrimSpace(s.Language)
	if strings.EqualFold(s.Language, "auto") {
		s.Language = ""
	}
	if strings.TrimSpace(s.Model) == "" {
		s.Model = DefaultModel
	}
	if strings.TrimSpace(s.VoiceModel) == "" {
		s.VoiceModel = DefaultSpeechModel
	}
	if strings.TrimSpace(s.Voice) == "" {
		s.Voice = DefaultVoice
	}
	section.Default(&s.MaxBytes, set, "max_bytes", DefaultMaxBytes)
	section.Default(&s.MaxSeconds, set, "max_seconds", DefaultMaxSeconds)
	section.Default(&s.Timeout, set, "timeout", section.Duration(DefaultTimeout))
}

// Check reports the section's problems.
func (s Config) Check(r section.Reporter) {
	if s.BaseURL != "" {
		if u, err := url.Parse(s.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			r.Add("base_url", fmt.Sprintf(`%q is not an http(s) URL; use the API root, such as "https://api.openai.com/v1" or "http://127.0.0.1:8000/v1"`, s.BaseURL))
		}
	}
	if n := len(s.Language); n != 0 && n != 2 && n != 3 {
		r.Add("language", fmt.Sprintf(`%q is not a language code; use an ISO-639-1 code such as "en" or "de", or "" to let the model tell`, s.Language))
	}
	if n := s.MaxBytes; n < 1 || n > 1<<30 {
		r.Add("max_bytes", fmt.Sprintf("%d is out of range; use 1 to %d (1 GiB)", n, 1<<30))
	}
	if n := s.MaxSeconds; n < 1 || n > 24*3600 {
		r.Add("max_seconds", fmt.Sprintf("%d is out of range; use 1 to 86400 (a day)", n))
	}
	if d := s.Timeout.Std(); d < time.Second || d > 30*time.Minute {
		r.Add("timeout", fmt.Sprintf(`%s is out of range; use a duration from 1s to 30m, such as "60s"`, s.Timeout))
	}
}

// FromConfig is the client of the configured speech provider (the
// speech section), or nil when there is none.
func FromConfig(s Config) *Client {
	if !s.Enabled() {
		return nil
	}
	return New(Options{BaseURL: s.BaseURL, APIKey: s.APIKey.Reveal(), Model: s.Model, SpeechModel: s.VoiceModel,
		Voice: s.Voice, Language: s.Language, Timeout: s.Timeout.Std(), MaxBytes: int64(s.MaxBytes), MaxSeconds: s.MaxSeconds})
}
