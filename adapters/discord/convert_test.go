package discord

import (
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/parleyd/parley/adapters"
)

func TestCleanText(t *testing.T) {
	t.Parallel()
	const bot = "100"
	mentions := []*discordgo.User{{ID: bot, Username: "parley", Bot: true}, {ID: "200", Username: "sam"}, {ID: "300", Username: "jo", GlobalName: "Jo J."}}
	tests := []struct{ name, in, want string }{
		{"no mention", "hello", "hello"},
		{"leading", "<@100> hello", "hello"},
		{"leading with comma", "<@100>, what now?", "what now?"},
		{"leading nickname form", "<@!100>: /reset", "/reset"},
		{"middle", "so <@100> what do you think", "so what do you think"},
		{"end", "thanks <@100>", "thanks"},
		{"twice", "<@100> hi <@100>", "hi"},
		{"line break kept", "first line <@100>\nsecond", "first line\nsecond"},
		{"others named", "ask <@200> and <@!300>", "ask @sam and @Jo J."},
		{"unknown user left as is", "ask <@999>", "ask <@999>"},
		{"only the mention", "<@100>", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cleanText(tc.in, bot, mentions); got != tc.want {
				t.Errorf("cleanText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFileRefsCapped(t *testing.T) {
	t.Parallel()
	var atts []*discordgo.MessageAttachment
	for i := range 12 {
		atts = append(atts, &discordgo.MessageAttachment{ID: string(rune('a' + i)), Filename: "f"})
	}
	if got := fileRefs(atts); len(got) != adapters.MaxFiles {
		t.Errorf("%d refs, want %d", len(got), adapters.MaxFiles)
	}
}

func TestNonce(t *testing.T) {
	t.Parallel()
	a, b := nonce("reply-1:0"), nonce("reply-1:1")
	if len(a) != 25 || a == b || a != nonce("reply-1:0") || nonce("") != "" {
		t.Errorf("nonce: %q %q", a, b)
	}
}
