package textcut_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parleyd/parley/textcut"
)

// Cut at every point of text mixing 1-, 2-, 3- and 4-byte characters,
// neither function splits a character, and each keeps as much as it may.
func TestNeverSplitsACharacter(t *testing.T) {
	for _, s := range []string{"", "plain ascii", "héllo wörld", "日本語のテキスト", "a😀b😀c", "ж€😀x", "é"} {
		runes := []rune(s)
		for n := -1; n <= len(s)+1; n++ {
			got := textcut.Bytes(s, n, "")
			if !utf8.ValidString(got) || !strings.HasPrefix(s, got) || len(got) > max(n, 0) && got != s {
				t.Fatalf("Bytes(%q, %d) = %q", s, n, got)
			}
			if rest := s[len(got):]; rest != "" && len(got)+utf8.RuneLen([]rune(rest)[0]) <= n {
				t.Fatalf("Bytes(%q, %d) = %q keeps less than it may", s, n, got)
			}
		}
		for n := -1; n <= len(runes)+1; n++ {
			got := textcut.Runes(s, n, "")
			want := string(runes[:min(max(n, 0), len(runes))])
			if got != want {
				t.Fatalf("Runes(%q, %d) = %q, want %q", s, n, got, want)
			}
		}
	}
}

func TestMoreIsAddedOnlyWhenCut(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"bytes, short enough", textcut.Bytes("hello", 5, "…"), "hello"},
		{"bytes, cut", textcut.Bytes("hello", 4, "…"), "hell…"},
		{"bytes, cut before a character", textcut.Bytes("héllo", 2, "…"), "h…"},
		{"bytes, empty", textcut.Bytes("", 0, "…"), ""},
		{"runes, shorter", textcut.Runes("hello", 10, "…"), "hello"},
		{"runes, short enough", textcut.Runes("héllo", 5, "…"), "héllo"},
		{"runes, cut", textcut.Runes("héllo wörld", 4, "…"), "héll…"},
		{"runes, empty", textcut.Runes("", 3, "…"), ""},
		{"runes, to nothing", textcut.Runes("abc", 0, "…"), "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("%q, want %q", tc.got, tc.want)
			}
		})
	}
}
