package wire

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"milliseconds win", map[string]string{"Retry-After": "7", "retry-after-ms": "250"}, 250 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			if got := RetryAfter(h, now); got != tc.want {
				t.Errorf("RetryAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("bad key sk-123 here", "sk-123"); got != "bad key [redacted] here" {
		t.Errorf("Redact = %q", got)
	}
	if got := Redact("unchanged", ""); got != "unchanged" {
		t.Errorf("Redact with empty secret = %q", got)
	}
}

func TestAppendJSONString(t *testing.T) {
	tests := []string{
		"", "plain", `quote " and \ backslash`, "new\nline\r\ttab", "ctrl \x00\x01\x1f\x7f",
		"<html> & friends", "héllo wörld ✓ 😀", "line\u2028sep\u2029para", "bad \xff\xfe utf8", "\xe2\x82",
	}
	for _, s := range tests {
		b := AppendJSONString([]byte("x"), s)
		if b[0] != 'x' {
			t.Fatalf("%q: prefix lost", s)
		}
		var got string
		if err := json.Unmarshal(b[1:], &got); err != nil {
			t.Fatalf("%q: %s is not a JSON string: %v", s, b[1:], err)
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if s == "bad \xff\xfe utf8" {
			want = "bad \ufffd\ufffd utf8" // one replacement per invalid byte, as encoding/json
		}
		if s == "\xe2\x82" {
			want = "\ufffd\ufffd"
		}
		if got != want {
			t.Errorf("%q round-trips to %q, want %q", s, got, want)
		}
		std, _ := json.Marshal(s)
		if !json.Valid(b[1:]) || (utf8.ValidString(s) && !strings.Contains(s, "<") && string(std) != string(b[1:])) {
			t.Errorf("%q: got %s, encoding/json gives %s", s, b[1:], std)
		}
	}
}
