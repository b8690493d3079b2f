package discord

import (
	"strconv"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/discord/discordtest"
)

// A MESSAGE_UPDATE that edits a message is delivered as a message of its
// own, naming the one it edits; an update without an edit time (an embed
// added) is not.
func TestEditedMessageIsDelivered(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	s := newSink()
	start(t, a, s)
	if err := srv.WaitReady(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	orig := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "helo", Timestamp: when})
	if got := s.next(t); got.MessageID != orig.ID || got.Edits != "" {
		t.Fatalf("delivered %+v", got)
	}
	embed := orig
	embed.Embeds = []any{map[string]any{"type": "link"}}
	srv.Dispatch("MESSAGE_UPDATE", embed)
	edited := orig
	at := when.Add(time.Minute)
	edited.Content, edited.EditedTimestamp = "hello", &at
	srv.Dispatch("MESSAGE_UPDATE", edited)
	got := s.next(t)
	if got.Edits != orig.ID || got.Text != "hello" || got.MessageID != orig.ID+":edit:"+strconv.FormatInt(at.UnixMilli(), 10) || got.ChatID != dmChan {
		t.Fatalf("the edit was delivered as %+v", got)
	}
}
