package telegram

import (
	"strings"
	"unicode"
	"unicode/utf8"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/internal/lazyregexp"
)

// format returns text as it is sent under the parse mode, and the Bot
// API's parse_mode ("" for plain text).
func format(parseMode, text string) (string, string) {
	switch parseMode {
	case ParseMarkdown:
		return markdownToHTML(text), tgbotapi.ModeHTML
	case ParseHTML:
		return text, tgbotapi.ModeHTML
	case ParseMarkdownV2:
		return text, tgbotapi.ModeMarkdownV2
	}
	return text, ""
}

var (
	fenceLine   = lazyregexp.New("^\\s*(```+|~~~+)\\s*([\\w+#.-]*)\\s*$")
	headingLine = lazyregexp.New(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	bulletLine  = lazyregexp.New(`^(\s*)[-*+]\s+(.*)$`)
)

// markdownToHTML renders the Markdown models usually write as the HTML
// subset Telegram takes: bold, italic, strikethrough, inline code, code
// blocks, links; headings become bold lines and list bullets "•".
// Everything else is escaped, so the result always parses; a line's
// markup never spans lines, and an unclosed code block is closed at the
// end (a chunk may cut one in two).
func markdownToHTML(md string) string {
	var b strings.Builder
	b.Grow(len(md) + len(md)/8)
	lines := strings.Split(md, "\n")
	var fence string // the open fence's marker, "" outside code blocks
	for i, line := range lines {
		if fence != "" {
			if closesFence(line, fence) {
				b.WriteString("</code></pre>")
				fence = ""
				if i < len(lines)-1 {
					b.WriteByte('\n')
				}
			} else {
				b.WriteString(escapeHTML(line))
				if i < len(lines)-1 && !closesFence(lines[i+1], fence) {
					b.WriteByte('\n')
				}
			}
			continue
		}
		if m := fenceLine.FindStringSubmatch(line); m != nil {
			fence = m[1][:3]
			if m[2] != "" {
				b.WriteString(`<pre><code class="language-` + escapeAttr(m[2]) + `">`)
			} else {
				b.WriteString("<pre><code>")
			}
			continue
		}
		switch {
		case headingLine.MatchString(line):
			b.WriteString("<b>" + inline(headingLine.FindStringSubmatch(line)[1], true) + "</b>")
		case bulletLine.MatchString(line):
			m := bulletLine.FindStringSubmatch(line)
			b.WriteString(m[1] + "• " + inline(m[2], true))
		default:
			b.WriteString(inline(line, true))
		}
		if i < len(lines)-1 {
			b.WriteByte('\n')
		}
	}
	if fence != "" {
		b.WriteString("</code></pre>")
	}
	return b.String()
}

func closesFence(line, fence string) bool {
	m := fenceLine.FindStringSubmatch(line)
	return m != nil && m[2] == "" && strings.HasPrefix(m[1], fence)
}

// inline renders one line's spans. Every tag it opens it closes, and all
// text is escaped.
func inline(s string, links bool) string {
	var b strings.Builder
	// unclosed holds the delimiters with no closer left in s: once a
	// search fails, a later one would scan a suffix of the same text and
	// fail too, so it is skipped (which keeps this linear per level).
	unclosed := map[string]bool{}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			b.WriteString(escapeHTML(s[i+1 : i+2]))
			i += 2
			continue
		case c == '`':
			n := run(s, i, '`')
			if end := strings.Index(s[i+n:], s[i:i+n]); end >= 0 && !strings.HasPrefix(s[i+n+end+n:], "`") {
				b.WriteString("<code>" + escapeHTML(s[i+n:i+n+end]) + "</code>")
				i += n + end + n
				continue
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		case c == '[' && links:
			if text, url, n, ok := link(s[i:]); ok {
				b.WriteString(`<a href="` + escapeAttr(url) + `">` + inline(text, false) + "</a>")
				i += n
				continue
			}
		case c == '*' || c == '_' || c == '~':
			if out, n, ok := emphasis(s, i, links, unclosed); ok {
				b.WriteString(out)
				i += n
				continue
			}
		}
		switch c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

// emphasis renders **bold**, __bold__, *italic*, _italic_ or ~~strike~~
// starting at s[i], with n the bytes it took.
func emphasis(s string, i int, links bool, unclosed map[string]bool) (out string, n int, ok bool) {
	c := s[i]
	width := min(run(s, i, c), 2)
	if c == '~' && width != 2 {
		return "", 0, false
	}
	delim := s[i : i+width]
	if unclosed[delim] {
		return "", 0, false
	}
	body := s[i+width:]
	if body == "" || isSpaceByte(body[0]) {
		return "", 0, false // "* item", "a * b"
	}
	if c == '_' && i > 0 && isWordByte(s[i-1]) {
		return "", 0, false // snake_case
	}
	for from := 0; from < len(body); {
		j := strings.Index(body[from:], delim)
		if j < 0 {
			unclosed[delim] = true
			return "", 0, false
		}
		j += from
		after := j + width
		closes := j > 0 && !isSpaceByte(body[j-1]) &&
			!(after < len(body) && body[after] == c) && // part of a longer run
			!(c == '_' && after < len(body) && isWordByte(body[after]))
		if !closes {
			from = j + 1
			continue
		}
		tag := "i"
		switch {
		case c == '~':
			tag = "s"
		case width == 2:
			tag = "b"
		}
		return "<" + tag + ">" + inline(body[:j], links) + "</" + tag + ">", width + after, true
	}
	unclosed[delim] = true
	return "", 0, false
}

// link parses "[text](url)" at the start of s, for http, https, tg and
// mailto URLs.
func link(s string) (text, url string, n int, ok bool) {
	close := strings.Index(s, "](")
	if close < 0 {
		return "", "", 0, false
	}
	end := strings.IndexByte(s[close+2:], ')')
	if end < 0 {
		return "", "", 0, false
	}
	text, url = s[1:close], strings.TrimSpace(s[close+2:close+2+end])
	if text == "" || strings.ContainsAny(url, " \t") || strings.Contains(text, "[") {
		return "", "", 0, false
	}
	lower := strings.ToLower(url)
	for _, scheme := range []string{"http://", "https://", "tg://", "mailto:"} {
		if strings.HasPrefix(lower, scheme) {
			return text, url, close + 2 + end + 1, true
		}
	}
	return "", "", 0, false
}

func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' }

func isWordByte(c byte) bool {
	return c == '_' || c >= utf8.RuneSelf || unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c))
}

func isASCIIPunct(c byte) bool {
	return c < utf8.RuneSelf && (unicode.IsPunct(rune(c)) || unicode.IsSymbol(rune(c)))
}

var (
	htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
)

// escapeHTML escapes what Telegram's HTML needs escaped in text.
func escapeHTML(s string) string { return htmlEscaper.Replace(s) }

// escapeAttr escapes an attribute value in double quotes.
func escapeAttr(s string) string { return attrEscaper.Replace(s) }
