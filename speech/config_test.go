package speech

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/config/section"
)

// The speech section fills in the client's own defaults, and each bad
// value is a problem naming its key.
func TestConfigCheck(t *testing.T) {
	var c Config
	c.SetDefaults(section.Set{})
	if c.Model != DefaultModel || c.VoiceModel != DefaultSpeechModel || c.Voice != DefaultVoice ||
		c.Timeout.Std() != DefaultTimeout || c.MaxBytes != DefaultMaxBytes || c.MaxSeconds != DefaultMaxSeconds {
		t.Fatalf("defaults %+v", c)
	}
	var l section.List
	c.Check(&l)
	if len(l) != 0 {
		t.Fatalf("the defaults have problems: %v", l)
	}

	bad := Config{BaseURL: "ftp://x", Language: "english", MaxBytes: -1, MaxSeconds: 0, Timeout: section.Duration(time.Hour)}
	l = nil
	bad.Check(&l)
	if want := []string{"base_url", "language", "max_bytes", "max_seconds", "timeout"}; !slices.Equal(l.Keys(), want) {
		t.Fatalf("problems at %v, want %v: %v", l.Keys(), want, l)
	}
	for _, p := range l {
		if !strings.Contains(p.Message, "use") {
			t.Errorf("%s: %q says not what to write instead", p.Key, p.Message)
		}
	}

	// An explicit 0 stays, for Check to report; "auto" is no language.
	c = Config{Language: " Auto ", BaseURL: " http://127.0.0.1:8000/v1/ "}
	c.SetDefaults(section.NewSet("speech", func(k string) bool { return k == "speech.max_seconds" }))
	if c.MaxSeconds != 0 || c.Language != "" || c.BaseURL != "http://127.0.0.1:8000/v1" {
		t.Errorf("got max_seconds %d, language %q, base_url %q", c.MaxSeconds, c.Language, c.BaseURL)
	}
}
