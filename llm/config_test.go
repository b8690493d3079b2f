package llm

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/config/section"
)

// The providers section: an empty entry is dropped, a kept one gets the
// default timeouts, and each bad value is a problem naming its key.
func TestProvidersConfigCheck(t *testing.T) {
	if _, ok := Lookup("openai"); !ok {
		t.Skip("no provider registered")
	}
	ps := ProvidersConfig{
		"openai": {APIKey: " k ", Timeouts: TimeoutsConfig{Idle: section.Duration(time.Second)}},
		"empty":  {Timeouts: TimeoutsConfig{Total: section.Duration(time.Minute)}},
	}
	ps.SetDefaults(section.Set{})
	got := ps["openai"]
	if _, kept := ps["empty"]; kept || got.APIKey != "k" || got.Timeouts.Total.Std() != DefaultTimeouts.Total || got.Timeouts.Idle.Std() != time.Second {
		t.Fatalf("after defaults %+v", ps)
	}
	var l section.List
	ps.Check(&l)
	if len(l) != 0 {
		t.Fatalf("problems %v", l)
	}

	bad := ProvidersConfig{
		"openai": {APIKey: "a b", BaseURL: "ftp://u:pw@x", MaxConcurrent: -1},
		"nobody": {APIKey: "k"},
	}
	l = nil
	bad.Check(&l)
	want := []string{"nobody", "openai.api_key", "openai.timeouts.connect", "openai.timeouts.first_byte", "openai.timeouts.idle",
		"openai.timeouts.total", "openai.max_concurrent", "openai.base_url"}
	if !slices.Equal(l.Keys(), want) {
		t.Fatalf("problems at %v, want %v: %v", l.Keys(), want, l)
	}
	for _, p := range l {
		if p.Key == "openai.base_url" && strings.Contains(p.Message, ":pw@") {
			t.Errorf("base_url's problem shows the password: %s", p.Message)
		}
	}
}
