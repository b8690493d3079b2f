package adapters

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Chunk splits text into pieces of at most limit runes, preferring, in
// order, a paragraph break, a line break, a sentence end, then a space. A
// word is cut only when it alone is longer than limit. limit <= 0 means no
// limit. Pieces are trimmed of the whitespace they were split on; joining
// them with the separators they were split at gives back the text.
func Chunk(text string, limit int) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	if limit <= 0 || utf8.RuneCountInString(text) <= limit {
		return []string{text}
	}
	var out []string
	for text != "" {
		if utf8.RuneCountInString(text) <= limit {
			out = append(out, text)
			break
		}
		cut := byteOffset(text, limit) // the most we may take
		end := splitPoint(text[:cut], text[cut:])
		piece := strings.TrimRightFunc(text[:end], unicode.IsSpace)
		if piece == "" { // only whitespace before the split: cut hard
			piece, end = text[:cut], cut
		}
		out = append(out, piece)
		text = strings.TrimLeftFunc(text[end:], unicode.IsSpace)
	}
	return out
}

// splitPoint picks where to end a piece within window, the longest allowed
// prefix of the remaining text; rest is what follows it.
func splitPoint(window, rest string) int {
	// A boundary in the first half of the window would make a runt piece;
	// fall through to a weaker boundary nearer the end instead.
	half := len(window) / 2
	for _, find := range []func(string) int{
		func(s string) int { return strings.LastIndex(s, "\n\n") },
		func(s string) int { return strings.LastIndexByte(s, '\n') },
		lastSentenceEnd,
	} {
		if i := find(window); i >= half && i > 0 {
			return i
		}
	}
	if startsWithSpace(rest) { // the window ends between two words
		return len(window)
	}
	if i := strings.LastIndexFunc(window, unicode.IsSpace); i > 0 {
		return i
	}
	return len(window) // one word longer than the limit
}

// lastSentenceEnd is the offset just after the last ". ", "! " or "? ".
func lastSentenceEnd(s string) int {
	best := -1
	for _, p := range []string{". ", "! ", "? ", "。"} {
		if i := strings.LastIndex(s, p); i >= 0 && i+len(p)-1 > best {
			best = i + len(p) - 1
			if p == "。" {
				best = i + len(p)
			}
		}
	}
	return best
}

func startsWithSpace(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(r)
}

// byteOffset is the byte offset of the n-th rune of s (len(s) if shorter).
func byteOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
