package agent

import (
	"cmp"
	"strings"
	"sync"

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

// hasFile says whether parts carry a file, whose line userContent adds.
func hasFile(parts []sessions.Part) bool {
	for _, p := range parts {
		if p.Type == sessions.PartFile {
			return true
		}
	}
	return false
}

// renderCache remembers the prompt text of user messages that carry
// files: a turn renders every message of its history, and a file part's
// line needs its data decoded, again each turn for the same messages (a
// chat of voice notes). A message never changes, so its id is the key. It
// keeps two generations of at most maxRendered texts each: when the
// current one is full it becomes the old one, and a text found in the old
// one moves to the current, so the messages turns keep reading stay
// however many others pass through (forgetting every text at once made
// each history be rendered again whenever the active chats' histories
// together held more than the cap).
type renderCache struct {
	mu       sync.Mutex
	cur, old map[sessions.MessageID]string
}

const maxRendered = 1024

func (c *renderCache) userContent(m sessions.Message) string {
	if !hasFile(m.Parts) {
		// Nothing to decode: every user message has parts (its turn's
		// settings), and only a file's asks for the cache.
		return m.Content
	}
	if c == nil || m.ID == "" {
		return userContent(m.Content, m.Parts)
	}
	c.mu.Lock()
	s, ok := c.cur[m.ID]
	if !ok {
		if s, ok = c.old[m.ID]; ok {
			c.keepLocked(m.ID, s)
		}
	}
	c.mu.Unlock()
	if ok {
		return s
	}
	s = userContent(m.Content, m.Parts)
	c.mu.Lock()
	c.keepLocked(m.ID, s)
	c.mu.Unlock()
	return s
}

// keepLocked puts s in the current generation, starting a new one when it
// is full.
func (c *renderCache) keepLocked(id sessions.MessageID, s string) {
	if c.cur == nil || len(c.cur) >= maxRendered {
		c.old, c.cur = c.cur, make(map[sessions.MessageID]string, 64)
	}
	c.cur[id] = s
}
