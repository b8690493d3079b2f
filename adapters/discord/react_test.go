package discord

import (
	"slices"
	"strings"
	"testing"

	"github.com/parleyd/parley/adapters/discord/discordtest"
)

// A message that came over the gateway gets the bot's reaction and loses
// it, over the REST API; an emoji Discord doesn't know is refused, saying
// so.
func TestReactions(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	s := newSink()
	start(t, a, s)
	ctx := waitCtx(t)
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	m := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "hi"})
	in := s.next(t)
	if err := a.React(ctx, in.ChatID, in.MessageID, "👀"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Reactions(dmChan, m.ID); !slices.Equal(got, []string{"👀"}) {
		t.Fatalf("reactions after React: %q", got)
	}
	if err := a.Unreact(ctx, in.ChatID, in.MessageID, "👀"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Reactions(dmChan, m.ID); len(got) != 0 {
		t.Fatalf("reactions after Unreact: %q", got)
	}
	if log := srv.ReactionLog(); len(log) != 2 || log[0].Removed || !log[1].Removed || log[0].MessageID != m.ID {
		t.Fatalf("reaction calls %+v", log)
	}
	err := a.React(ctx, in.ChatID, in.MessageID, "eyes")
	if err == nil || !strings.Contains(err.Error(), "Unknown Emoji") {
		t.Fatalf("an unknown emoji: %v", err)
	}
	if err := a.React(ctx, in.ChatID, "not-a-message", "👀"); err == nil {
		t.Fatal("a bad message id was sent")
	}
}
