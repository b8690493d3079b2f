package memory

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseQuery(t *testing.T) {
	for _, tc := range []struct {
		in    string
		terms []string
	}{
		{"green tea", []string{"green", "tea"}},
		{`"green tea"`, []string{"green", "tea"}},
		{"-tea", []string{"tea"}},
		{"tea*", []string{"tea"}},
		{"content:tea", []string{"content", "tea"}},
		{"(tea OR coffee) AND NOT milk", []string{"tea", "or", "coffee", "and", "not", "milk"}},
		{"NEAR(tea coffee, 2)", []string{"near", "tea", "coffee", "2"}},
		{"Tea TEA tea", []string{"tea"}},
		{"alice@example.com", []string{"alice", "example", "com"}},
		{"Crème brûlée", []string{"crème", "brûlée"}},
		{"東京 タワー", []string{"東京", "タワー"}},
		{"tea\x00coffee", []string{"tea", "coffee"}},
		{"tea \xff\xfe coffee", []string{"tea", "coffee"}},
		{`*** "" () : - ^`, nil},
		{"", nil},
	} {
		t.Run(tc.in, func(t *testing.T) {
			q := parseQuery(tc.in)
			if !slices.Equal(q.terms, tc.terms) {
				t.Fatalf("terms of %q = %q, want %q", tc.in, q.terms, tc.terms)
			}
			if q.empty() != (len(tc.terms) == 0) {
				t.Fatalf("empty() = %v", q.empty())
			}
			for _, c := range q.chunks {
				if strings.ContainsRune(c, 0) || !utf8.ValidString(c) {
					t.Fatalf("chunk %q holds a NUL or invalid UTF-8", c)
				}
			}
		})
	}
}

func TestParseQueryBoundsWork(t *testing.T) {
	q := parseQuery(strings.Repeat("word"+strings.Repeat("x", 100)+" ", 1000))
	if len(q.terms) != 1 || len([]rune(q.terms[0])) != maxTermRunes {
		t.Fatalf("a repeated long word gave terms %q", q.terms)
	}
	var b strings.Builder
	for i := range 100 {
		b.WriteString("w" + strings.Repeat("a", i%30) + string(rune('a'+i%26)) + " ")
	}
	q = parseQuery(b.String())
	if len(q.terms) > maxQueryTerms || len(q.chunks) > maxQueryTerms {
		t.Fatalf("%d terms and %d chunks, want at most %d each", len(q.terms), len(q.chunks), maxQueryTerms)
	}
}

func TestFTS5ExpressionQuotesEveryTerm(t *testing.T) {
	q := parseQuery(`tea" OR scope_key : x NEAR(`)
	got := q.fts5("abc")
	want := `scope_key : "abc" AND {content tags} : ("tea" OR "or" OR "scope" OR "key" OR "x" OR "near")`
	if got != want {
		t.Fatalf("fts5 = %s\nwant   %s", got, want)
	}
}
