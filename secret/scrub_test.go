package secret

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

// A value with <, >, &, " and \ is hidden in every form it takes once
// encoded: raw, JSON-escaped (HTML escaping on and off, once and twice)
// and URL-escaped; short values are left alone.
func TestScrubberHidesEveryForm(t *testing.T) {
	const v = `p<a>s&s"w\ord-0123`
	s := NewScrubber(v, "short", "Bearer tok-abcdefgh12")
	once, _ := json.Marshal(v)
	twice, _ := json.Marshal(string(once))
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"nested": map[string]string{"v": v}})
	structured, _ := json.Marshal(map[string]any{"resource": map[string]any{"text": v}})
	for _, text := range []string{
		"raw " + v + " end",
		"json " + string(once),
		"twice " + string(twice),
		"no html escape " + plain.String(),
		"structured " + string(structured),
		"query ?k=" + url.QueryEscape(v),
		"path /" + url.PathEscape(v),
		"header token tok-abcdefgh12 alone",
	} {
		got := s.Scrub(text)
		if strings.Contains(got, "0123") || strings.Contains(got, "tok-abcdefgh12") || !strings.Contains(got, Redacted) {
			t.Errorf("%q scrubbed to %q", text, got)
		}
	}
	if got := s.Scrub("a short flag"); got != "a short flag" {
		t.Errorf("a short value was hidden: %q", got)
	}
	var nilScrubber *Scrubber
	if nilScrubber.Scrub(v) != v {
		t.Error("a nil Scrubber changed text")
	}
}

// A log line through the Scrubber's handler hides the values in its
// message, string attributes, errors, Stringers, groups and With attrs.
func TestScrubberHandlerHidesValuesInLogs(t *testing.T) {
	const v = "vault-value-0123456789"
	s := NewScrubber()
	var out bytes.Buffer
	log := slog.New(s.Handler(slog.NewJSONHandler(&out, nil)))
	s.Add(v) // values added later count too
	log.With("url", "https://x/?k="+v).Warn("call "+v, "error", errors.New("server said "+v),
		"list", []string{v}, slog.Group("g", "inner", v), "stringer", stringer(v), "n", 3)
	if got := out.String(); strings.Contains(got, "0123456789") || !strings.Contains(got, Redacted) || !strings.Contains(got, `"n":3`) {
		t.Fatalf("logged: %s", got)
	}
}

type stringer string

func (s stringer) String() string { return fmt.Sprintf("stringer(%s)", string(s)) }
