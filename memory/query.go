package memory

import (
	"strings"
	"unicode"

	"github.com/parleyd/parley/textcut"
)

// A search query is plain words. Whatever the caller typed (quotes, -, *,
// :, parentheses, NEAR, AND/OR, ^, NUL bytes, invalid UTF-8) is reduced to
// words before any engine sees it, so no query is a syntax error and none
// can reach past its scope's filter.
const (
	// maxQueryTerms caps how many words one search uses.
	maxQueryTerms = 16
	// maxTermRunes caps one word; longer ones are cut.
	maxTermRunes = 64
)

// query is a user's search text reduced to what the engines accept.
type query struct {
	// terms are the lowercase runs of letters and digits, without repeats:
	// the words SQLite's unicode61 tokenizer and Typesense index.
	terms []string
	// chunks are the whitespace-separated pieces of the text, cleaned of NUL
	// and invalid UTF-8. PostgreSQL's parser keeps some punctuated tokens
	// whole (alice@example.com, example.org/path), so it is given these too,
	// through plainto_tsquery, which has no syntax to get wrong.
	chunks []string
}

func parseQuery(text string) query {
	text = strings.ToValidUTF8(strings.ReplaceAll(text, "\x00", " "), " ")
	var q query
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !isWordRune(r) }) {
		if len(q.terms) == maxQueryTerms {
			break
		}
		w = strings.ToLower(textcut.Runes(w, maxTermRunes, ""))
		if !seen[w] {
			seen[w] = true
			q.terms = append(q.terms, w)
		}
	}
	for _, c := range strings.Fields(text) {
		if len(q.chunks) == maxQueryTerms {
			break
		}
		if strings.IndexFunc(c, isWordRune) < 0 {
			continue
		}
		c = textcut.Runes(c, maxTermRunes, "")
		if !seen[c] {
			seen[c] = true
			q.chunks = append(q.chunks, c)
		}
	}
	return q
}

func (q query) empty() bool { return len(q.terms) == 0 }

// isWordRune matches SQLite's unicode61 token characters: letters, numbers
// and private-use code points.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r)
}

// fts5 is the FTS5 MATCH expression for the terms in one scope: the scope
// token in its own column, and any term in the content or tags. Every term
// is a quoted string, so none is read as an operator; terms hold only
// letters and digits, so none needs escaping.
func (q query) fts5(scopeKey string) string {
	var b strings.Builder
	b.WriteString(`scope_key : "` + scopeKey + `" AND {content tags} : (`)
	for i, t := range q.terms {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString(`"` + t + `"`)
	}
	b.WriteString(")")
	return b.String()
}

// typesense is the q parameter: the words, space-separated, with nothing
// Typesense reads as an operator (a leading - excludes, quotes make phrases).
func (q query) typesense() string { return strings.Join(q.terms, " ") }
