package agent

import (
	"cmp"
	"strings"

	"github.com/parleyd/parley/sessions"
)

// userContent is a user message as the model reads it: its text, then a
// line naming each file sent with it (name, type, size, and why its text
// is missing or cut), followed by the text parley read of the file.
func userContent(text string, parts []sessions.Part) string {
	var b strings.Builder
	b.WriteString(text)
	for _, p := range parts {
		d, ok := p.File()
		if !ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		name := cmp.Or(p.Name, "unnamed file")
		b.WriteString("[File: " + name + ", " + cmp.Or(p.MediaType, "unknown type"))
		if d.Size > 0 {
			b.WriteString(", " + sessions.ByteSize(d.Size))
		}
		if d.Note != "" {
			b.WriteString("; " + d.Note)
		}
		b.WriteByte(']')
		if p.Text != "" {
			b.WriteString("\n--- " + name + " ---\n")
			b.WriteString(strings.TrimRight(p.Text, "\n"))
			b.WriteString("\n--- end of " + name + " ---")
		}
	}
	return b.String()
}
