package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Defaults of the speech section.
const (
	DefaultSpeechModel       = "whisper-1"
	DefaultSpeechVoiceModel  = "tts-1"
	DefaultSpeechVoice       = "alloy"
	DefaultSpeechTimeout     = 60 * time.Second
	DefaultSpeechMaxBytes    = 25 << 20
	DefaultSpeechMaxSeconds  = 600
	DefaultSpeechLongReplies = 600
)

// Speech is the speech provider: an OpenAI-compatible audio API that
// transcribes voice notes and, for spoken replies, speaks. Without a
// base_url voice notes reach the agent as files, untranscribed.
type Speech struct {
	// BaseURL is the API root: "https://api.openai.com/v1",
	// "https://api.groq.com/openai/v1", or a local whisper server's.
	BaseURL string `yaml:"base_url"`
	APIKey  Secret `yaml:"api_key"`
	// Model transcribes (whisper-1, whisper-large-v3, ...).
	Model string `yaml:"model"`
	// Language is an ISO-639-1 code, or "" (auto) to let the model tell.
	Language string `yaml:"language"`
	// MaxBytes and MaxSeconds cap the voice notes transcribed.
	MaxBytes   int `yaml:"max_bytes"`
	MaxSeconds int `yaml:"max_seconds"`
	// Timeout bounds each call to the provider.
	Timeout Duration `yaml:"timeout"`
	// VoiceModel and Voice speak replies (agents[].voice_replies).
	VoiceModel string `yaml:"voice_model"`
	Voice      string `yaml:"voice"`
}

// Enabled reports whether a provider is configured.
func (s Speech) Enabled() bool { return s.BaseURL != "" }

// checkSpeech fills the speech section's defaults and reports its
// problems.
func (c *Config) checkSpeech(ck *checker) {
	s := &c.Speech
	s.BaseURL = strings.TrimRight(strings.TrimSpace(s.BaseURL), "/")
	s.APIKey = Secret(strings.TrimSpace(string(s.APIKey)))
	s.Language = strings.TrimSpace(s.Language)
	if strings.EqualFold(s.Language, "auto") {
		s.Language = ""
	}
	if strings.TrimSpace(s.Model) == "" {
		s.Model = DefaultSpeechModel
	}
	if strings.TrimSpace(s.VoiceModel) == "" {
		s.VoiceModel = DefaultSpeechVoiceModel
	}
	if strings.TrimSpace(s.Voice) == "" {
		s.Voice = DefaultSpeechVoice
	}
	if s.MaxBytes == 0 && !ck.set["speech.max_bytes"] {
		s.MaxBytes = DefaultSpeechMaxBytes
	}
	if s.MaxSeconds == 0 && !ck.set["speech.max_seconds"] {
		s.MaxSeconds = DefaultSpeechMaxSeconds
	}
	if s.Timeout == 0 && !ck.set["speech.timeout"] {
		s.Timeout = Duration(DefaultSpeechTimeout)
	}
	if s.BaseURL != "" {
		if u, err := url.Parse(s.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ck.add("speech.base_url", fmt.Sprintf(`%q is not an http(s) URL; use the API root, such as "https://api.openai.com/v1" or "http://127.0.0.1:8000/v1"`, s.BaseURL))
		}
	}
	if n := len(s.Language); n != 0 && n != 2 && n != 3 {
		ck.add("speech.language", fmt.Sprintf(`%q is not a language code; use an ISO-639-1 code such as "en" or "de", or "" to let the model tell`, s.Language))
	}
	if n := s.MaxBytes; n < 1 || n > 1<<30 {
		ck.add("speech.max_bytes", fmt.Sprintf("%d is out of range; use 1 to %d (1 GiB)", n, 1<<30))
	}
	if n := s.MaxSeconds; n < 1 || n > 24*3600 {
		ck.add("speech.max_seconds", fmt.Sprintf("%d is out of range; use 1 to 86400 (a day)", n))
	}
	if d := s.Timeout.Std(); d < time.Second || d > 30*time.Minute {
		ck.add("speech.timeout", fmt.Sprintf(`%s is out of range; use a duration from 1s to 30m, such as "60s"`, s.Timeout))
	}
}
