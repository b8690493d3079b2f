package section

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in YAML as a string such as "5s" or
// "1m30s".
type Duration time.Duration

// DurationHint says how a duration is written, for messages.
const DurationHint = `a duration such as "5s" or "1m30s"`

// UnmarshalYAML decodes a Go duration string. A bad value is reported as a
// *yaml.TypeError so decoding carries on and every problem is reported.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: expected %s", n.Line, DurationHint)}}
	}
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: expected %s, got %q", n.Line, DurationHint, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML encodes the duration as a string such as "1m30s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON encodes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// String formats the duration like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Normalize lowercases and trims an enumerated setting, and gives def
// when it is empty.
func Normalize(v, def string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" {
		return def
	}
	return v
}
