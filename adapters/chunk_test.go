package adapters

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestChunk(t *testing.T) {
	para := strings.Repeat("word ", 6) + "end." // 34 chars
	cases := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{"empty", "  ", 10, nil},
		{"fits", "hello world", 11, []string{"hello world"}},
		{"no limit", strings.Repeat("x", 5000), 0, []string{strings.Repeat("x", 5000)}},
		{"paragraph first", para + "\n\n" + para, 50, []string{para, para}},
		{"line break", "first line here\nsecond line here", 20, []string{"first line here", "second line here"}},
		{"sentence", "One two three. Four five six seven", 20, []string{"One two three.", "Four five six seven"}},
		{"space", "alpha beta gamma delta", 12, []string{"alpha beta", "gamma delta"}},
		{"window ends at a space", "abcd efgh", 4, []string{"abcd", "efgh"}},
		{"long word is cut", "tiny " + strings.Repeat("x", 12), 5, []string{"tiny", "xxxxx", "xxxxx", "xx"}},
		{"runes, not bytes", strings.Repeat("é", 6) + " " + strings.Repeat("ü", 3), 6, []string{strings.Repeat("é", 6), strings.Repeat("ü", 3)}},
		{"emoji", "😀😀😀 😀😀", 3, []string{"😀😀😀", "😀😀"}},
		{"runt paragraph skipped", "a\n\n" + strings.Repeat("b ", 20), 20, []string{"a\n\nb b b b b b b b b", "b b b b b b b b b b", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Chunk(tc.text, tc.limit)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Fatalf("Chunk(%q, %d)\n got %q\nwant %q", tc.text, tc.limit, got, tc.want)
			}
		})
	}
}

// Telegram's limit: every piece fits, nothing is lost, and no word is split.
func TestChunkTelegramLimit(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 20000; i++ {
		b.WriteString("Sentence number ")
		b.WriteString(strings.Repeat("z", i%13+1))
		b.WriteString(". ")
		if i%17 == 0 {
			b.WriteString("\n\n")
		}
	}
	text := strings.TrimSpace(b.String())
	pieces := Chunk(text, 4096)
	if len(pieces) < 5 {
		t.Fatalf("%d pieces for %d chars", len(pieces), len(text))
	}
	for i, p := range pieces {
		if n := utf8.RuneCountInString(p); n > 4096 || n == 0 {
			t.Fatalf("piece %d has %d runes", i, n)
		}
	}
	if strings.Join(strings.Fields(strings.Join(pieces, " ")), " ") != strings.Join(strings.Fields(text), " ") {
		t.Fatal("the pieces do not add up to the text")
	}
	words := map[string]bool{}
	for _, w := range strings.Fields(text) {
		words[w] = true
	}
	for _, p := range pieces {
		for _, w := range strings.Fields(p) {
			if !words[w] {
				t.Fatalf("word %q was split", w)
			}
		}
	}
}

func FuzzChunk(f *testing.F) {
	f.Add("hello world. this is a test\n\nof chunking", 7)
	f.Add("😀😀 é", 1)
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if limit <= 0 || limit > 100 || !utf8.ValidString(text) {
			return
		}
		pieces := Chunk(text, limit)
		for _, p := range pieces {
			if utf8.RuneCountInString(p) > limit || p == "" {
				t.Fatalf("piece %q over limit %d or empty", p, limit)
			}
		}
		if strings.Join(strings.Fields(strings.Join(pieces, "")), "") != strings.Join(strings.Fields(text), "") {
			t.Fatalf("content changed: %q -> %q", text, pieces)
		}
	})
}
