package sessionsql

import (
	"fmt"
	"strings"
	"unicode"
)

// refused are the words no statement may use, outside quotes and comments:
// each reaches past the session's database (another file, the engine's
// settings, a copy written elsewhere, native code).
var refused = map[string]string{
	"ATTACH":         "ATTACH opens another database file",
	"DETACH":         "DETACH works on attached databases",
	"PRAGMA":         "PRAGMA changes the engine's settings and limits",
	"VACUUM":         "VACUUM can write the database elsewhere",
	"LOAD_EXTENSION": "load_extension loads native code",
}

// check says why a statement text may not run, or nil: it reads the text
// as SQLite's tokenizer does (strings, quoted names and comments are not
// words) and refuses any word in refused.
func check(text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("no SQL given; pass sql, such as CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
	}
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(text, i, c)
		case c == '[':
			if j := strings.IndexByte(text[i:], ']'); j >= 0 {
				i += j + 1
			} else {
				i = len(text)
			}
		case c == '-' && strings.HasPrefix(text[i:], "--"):
			if j := strings.IndexByte(text[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(text)
			}
		case c == '/' && strings.HasPrefix(text[i:], "/*"):
			if j := strings.Index(text[i+2:], "*/"); j >= 0 {
				i += j + 4
			} else {
				i = len(text)
			}
		case isWord(rune(c)):
			j := i
			for j < len(text) && isWord(rune(text[j])) {
				j++
			}
			if why, ok := refused[strings.ToUpper(text[i:j])]; ok {
				return fmt.Errorf("%s is not allowed here: %s; this conversation's database is the only one, and its limits are fixed", strings.ToUpper(text[i:j]), why)
			}
			i = j
		default:
			i++
		}
	}
	return nil
}

// skipQuoted is the index after the quoted text starting at i, where a
// doubled quote is one quote inside it.
func skipQuoted(text string, i int, q byte) int {
	for j := i + 1; j < len(text); j++ {
		if text[j] == q {
			if j+1 < len(text) && text[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(text)
}

func isWord(r rune) bool {
	return r == '_' || r == '$' || r > unicode.MaxASCII || unicode.IsLetter(r) || unicode.IsDigit(r)
}
