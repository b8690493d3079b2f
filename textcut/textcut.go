// Package textcut shortens text without splitting a character: by bytes,
// where a size is what is bounded (a database column, a header, a model's
// budget), or by characters, where a person reads it.
package textcut

import "unicode/utf8"

// Bytes is s cut to at most n bytes, ending on a character boundary, with
// more (such as "…") appended when it was cut; more is not counted in n.
func Bytes(s string, n int, more string) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + more
}

// Runes is s cut to its first n characters, with more (such as "…")
// appended when it was cut; more is not counted in n.
func Runes(s string, n int, more string) string {
	n = max(n, 0)
	for i := range s {
		if n == 0 {
			return s[:i] + more
		}
		n--
	}
	return s
}
