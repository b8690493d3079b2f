package telegram

import (
	"strings"
	"testing"
	"unicode/utf8"

	tt "github.com/parleyd/parley/adapters/telegram/telegramtest"
)

func TestMarkdownToHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text.", "plain text."},
		{"a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"**bold** and __also__", "<b>bold</b> and <b>also</b>"},
		{"*it* and _it_", "<i>it</i> and <i>it</i>"},
		{"***both***", "<b><i>both</i></b>"},
		{"~~gone~~", "<s>gone</s>"},
		{"snake_case_name and file_name.go", "snake_case_name and file_name.go"},
		{"2 * 3 * 4", "2 * 3 * 4"},
		{"**unclosed bold", "**unclosed bold"},
		{"`a <b> *c*`", "<code>a &lt;b&gt; *c*</code>"},
		{"``code with ` tick``", "<code>code with ` tick</code>"},
		{"[docs](https://example.com/a?b=1&c=\"2\")", `<a href="https://example.com/a?b=1&amp;c=&quot;2&quot;">docs</a>`},
		{"[**bold link**](https://x.example)", `<a href="https://x.example"><b>bold link</b></a>`},
		{"[not a link](javascript:alert(1))", "[not a link](javascript:alert(1))"},
		{"# Title\n## Sub *x*", "<b>Title</b>\n<b>Sub <i>x</i></b>"},
		{"- one\n* two\n  + nested", "• one\n• two\n  • nested"},
		{"\\*not italic\\*", "*not italic*"},
		{"```go\nif a < b {\n\treturn\n}\n```\nafter", "<pre><code class=\"language-go\">if a &lt; b {\n\treturn\n}</code></pre>\nafter"},
		{"before\n```\nx\n```", "before\n<pre><code>x</code></pre>"},
		{"```\nunclosed <", "<pre><code>unclosed &lt;</code></pre>"},
		{"```\n```", "<pre><code></code></pre>"},
		{"a\n\nb", "a\n\nb"},
		{"emoji 😀 **b**", "emoji 😀 <b>b</b>"},
	}
	for _, tc := range tests {
		got := markdownToHTML(tc.in)
		if got != tc.want {
			t.Errorf("markdownToHTML(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if _, err := tt.CheckHTML(got); err != nil {
			t.Errorf("markdownToHTML(%q) = %q, which Telegram refuses: %v", tc.in, got, err)
		}
	}
}

// FuzzMarkdownToHTML: whatever a model writes, the HTML parses, and what
// Telegram shows is no longer than the text (so a chunk that fit still
// fits).
func FuzzMarkdownToHTML(f *testing.F) {
	for _, s := range []string{"**a*b**c*", "_a__b_", "[x](http://a)(b)", "```\n```go\n", "`", "<&>\"'", "~~~\n~~", "# ", "\\", "* * *", "**`x**`", "[a](http://x)[b](https://y)", "_*~`[]()#-+!|{}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !utf8.ValidString(in) {
			return
		}
		out := markdownToHTML(in)
		shown, err := tt.CheckHTML(out)
		if err != nil {
			t.Fatalf("markdownToHTML(%q) = %q: %v", in, out, err)
		}
		if utf16Len(shown) > utf16Len(in) {
			t.Fatalf("markdownToHTML(%q) shows %q, longer than the input", in, shown)
		}
	})
}

func TestFormatModes(t *testing.T) {
	for _, tc := range []struct{ mode, text, want, parse string }{
		{ParseMarkdown, "**x**", "<b>x</b>", "HTML"},
		{ParseHTML, "<b>x</b>", "<b>x</b>", "HTML"},
		{ParseMarkdownV2, "*x*", "*x*", "MarkdownV2"},
		{ParseNone, "**x**", "**x**", ""},
	} {
		got, parse := format(tc.mode, tc.text)
		if got != tc.want || parse != tc.parse {
			t.Errorf("format(%s, %q) = %q, %q", tc.mode, tc.text, got, parse)
		}
	}
	if !strings.Contains(markdownToHTML(strings.Repeat("a_b ", 1000)), "a_b") {
		t.Error("snake case mangled")
	}
}
