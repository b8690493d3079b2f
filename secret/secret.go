// Package secret holds the string type for tokens and keys, which every
// way of printing, logging or encoding shows as "[redacted]". It is a leaf:
// config and the channels name it without importing one another.
package secret

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
)

// Redacted is what a secret prints as.
const Redacted = "[redacted]"

// String is a token or API key. Every way of printing, logging or encoding it
// shows "[redacted]" (or "" when it is empty); only Reveal returns the value.
//
// fmt can only reach the methods of exported struct fields, so keep secrets
// in exported fields or print them directly.
type String string

// Reveal returns the secret itself, for handing to the service that needs it.
func (s String) Reveal() string { return string(s) }

// String returns "[redacted]", or "" when the secret is empty.
func (s String) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString keeps %#v from printing the value.
func (s String) GoString() string { return s.String() }

// LogValue keeps slog from printing the value.
func (s String) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes the Redacted form.
func (s String) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML encodes the Redacted form.
func (s String) MarshalYAML() (any, error) { return s.String(), nil }

// Format prints the Redacted form for every verb.
func (s String) Format(f fmt.State, verb rune) { Format(f, verb, s.String()) }

// Format prints already-Redacted text, honouring width, flags and %q.
func Format(f fmt.State, verb rune, text string) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = io.WriteString(f, text)
	case verb == 'v', verb == 's', verb == 'q', verb == 'x', verb == 'X':
		_, _ = fmt.Fprintf(f, fmt.FormatString(f, verb), text)
	default:
		_, _ = fmt.Fprintf(f, "%%!%c(%s)", verb, text)
	}
}

// Reveal is the values of ss, for the code that must compare them.
func Reveal(ss []String) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Reveal()
	}
	return out
}
