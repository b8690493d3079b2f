package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const value = "tok-0123456789abcdef"

// holder is how secrets travel: in exported struct fields.
type holder struct{ Token String }

// No way of printing, logging or encoding a String shows its value; Reveal does.
func TestStringNeverShowsItsValue(t *testing.T) {
	s := String(value)
	var printed []string
	for _, format := range []string{"%v", "%s", "%q", "%x", "%#v", "%+v", "%d", "%10s"} {
		printed = append(printed, fmt.Sprintf(format, s), fmt.Sprintf(format, holder{s}))
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "token", s, "holder", holder{s})
	encoded, err := json.Marshal(holder{s})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(printed, "\n") + logged.String() + string(encoded)
	if strings.Contains(all, value) || strings.Contains(all, fmt.Sprintf("%x", value)) {
		t.Fatalf("the value leaked:\n%s", all)
	}
	if !strings.Contains(all, Redacted) {
		t.Fatalf("nothing says %s:\n%s", Redacted, all)
	}
	if s.Reveal() != value {
		t.Fatalf("Reveal() = %q", s.Reveal())
	}
	if String("").String() != "" {
		t.Fatal("an empty secret should print empty")
	}
}
