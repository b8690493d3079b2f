package sessions

import (
	"encoding/json"
	"strings"
)

// EstimateTokens guesses the tokens in s when no provider count is known. It
// deliberately overcounts, so compaction fires early rather than late:
// JSON is chars/3, text with code fences chars/6, plain text chars/4.
// Chars are UTF-8 bytes: the same for ASCII, and more for scripts where a
// character is usually a token of its own.
func EstimateTokens(s string) int64 {
	n := int64(len(s))
	if n == 0 {
		return 0
	}
	div := int64(4)
	switch {
	case looksLikeJSON(s):
		div = 3
	case strings.Contains(s, "```"):
		div = 6
	}
	return (n + div - 1) / div
}

func looksLikeJSON(s string) bool {
	t := strings.TrimSpace(s)
	if len(t) < 2 {
		return false
	}
	first, last := t[0], t[len(t)-1]
	if !(first == '{' && last == '}') && !(first == '[' && last == ']') {
		return false
	}
	return json.Valid([]byte(t))
}

// estimate is a message's token estimate: its text, tool calls and parts.
func (m *Message) estimate() int64 {
	n := EstimateTokens(m.Content)
	for _, c := range m.ToolCalls {
		n += EstimateTokens(c.Name) + (int64(len(c.Arguments))+2)/3
	}
	for _, p := range m.Parts {
		if p.Type == PartTurn {
			continue // a record of the turn, never sent to a model
		}
		n += EstimateTokens(p.Text) + (int64(len(p.Data))+2)/3
	}
	return n
}
