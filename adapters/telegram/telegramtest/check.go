package telegramtest

import (
	"fmt"
	"strconv"
	"strings"
)

// htmlTags are the tags Telegram's HTML parse mode takes.
var htmlTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "span": true, "tg-spoiler": true,
	"a": true, "tg-emoji": true, "code": true, "pre": true, "blockquote": true,
}

var namedEntities = map[string]string{"lt": "<", "gt": ">", "amp": "&", "quot": `"`}

// CheckHTML parses text as Telegram's HTML parse mode does and returns
// the text as shown, or the error Telegram gives after "can't parse
// entities: ": an unsupported or unclosed tag, or an unmatched end tag.
// An "&" that starts no entity is shown as written, as Telegram does.
func CheckHTML(text string) (string, error) {
	var shown strings.Builder
	var open []string
	for i := 0; i < len(text); {
		switch text[i] {
		case '&':
			if s, n := decodeEntity(text[i:]); n > 0 {
				shown.WriteString(s)
				i += n
				continue
			}
			shown.WriteByte('&')
			i++
		case '<':
			end := strings.IndexByte(text[i:], '>')
			if end < 0 {
				return "", fmt.Errorf("Unclosed start tag at byte offset %d", i)
			}
			tag := text[i+1 : i+end]
			if name, ok := strings.CutPrefix(tag, "/"); ok {
				name = strings.ToLower(strings.TrimSpace(name))
				if len(open) == 0 {
					return "", fmt.Errorf("Unexpected end tag at byte offset %d", i)
				}
				if top := open[len(open)-1]; name != "" && name != top {
					return "", fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top, name)
				}
				open = open[:len(open)-1]
			} else {
				name, _, _ := strings.Cut(tag, " ")
				name = strings.ToLower(name)
				if !htmlTags[name] {
					return "", fmt.Errorf("Unsupported start tag %q at byte offset %d", name, i)
				}
				open = append(open, name)
			}
			i += end + 1
		default:
			shown.WriteByte(text[i])
			i++
		}
	}
	if len(open) > 0 {
		return "", fmt.Errorf("Can't find end tag corresponding to start tag %q", open[len(open)-1])
	}
	return shown.String(), nil
}

// decodeEntity decodes "&lt;", "&#60;" or "&#x3c;" at the start of s,
// returning the character and the bytes taken (0 if none).
func decodeEntity(s string) (string, int) {
	end := strings.IndexByte(s, ';')
	if end < 2 || end > 10 {
		return "", 0
	}
	name := s[1:end]
	if v, ok := namedEntities[name]; ok {
		return v, end + 1
	}
	if num, ok := strings.CutPrefix(name, "#"); ok {
		base := 10
		if hex, ok := strings.CutPrefix(strings.ToLower(num), "x"); ok {
			num, base = hex, 16
		}
		if n, err := strconv.ParseUint(num, base, 32); err == nil && n > 0 && n <= 0x10FFFF {
			return string(rune(n)), end + 1
		}
	}
	return "", 0
}

// CheckMarkdownV2 approximates Telegram's MarkdownV2 check: outside code,
// the characters that are never markup (. ! # + - = { } | >) must be
// escaped with "\", and *, _ and ~ must pair up. It returns the error
// Telegram gives after "can't parse entities: ".
func CheckMarkdownV2(text string) error {
	counts := map[byte]int{}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '\\':
			i++
		case c == '`':
			n := 1
			if strings.HasPrefix(text[i:], "```") {
				n = 3
			}
			end := strings.Index(text[i+n:], text[i:i+n])
			if end < 0 {
				return fmt.Errorf("Can't find end of Code entity at byte offset %d", i)
			}
			i += n + end + n - 1
		case strings.IndexByte(".!#+-={}|>", c) >= 0:
			return fmt.Errorf("Character '%c' is reserved and must be escaped with the preceding '\\'", c)
		case c == '*' || c == '_' || c == '~':
			counts[c]++
		}
	}
	for _, c := range []byte("*_~") {
		if counts[c]%2 != 0 {
			return fmt.Errorf("Can't find end of %s entity", map[byte]string{'*': "Bold", '_': "Italic", '~': "Strikethrough"}[c])
		}
	}
	return nil
}
