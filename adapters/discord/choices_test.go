package discord

import (
	"context"
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/discord/discordtest"
)

// pressSink takes messages and presses, answering each press with a note.
type pressSink struct {
	*sink
	presses chan adapters.Press
}

func (s pressSink) Press(_ context.Context, p adapters.Press) string {
	s.presses <- p
	return "Allowed once"
}

// A question goes out with buttons; a press in a guild channel or a DM
// reaches the sink with who pressed where, and is answered with the
// sink's note, shown to the presser alone; closing the question edits it
// and takes the buttons away.
func TestChoices(t *testing.T) {
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	s := pressSink{sink: newSink(), presses: make(chan adapters.Press, 2)}
	start(t, a, s)
	ctx := waitCtx(t)
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	const channel, guild = "1200000000000000001", "1400000000000000001"
	choices := []adapters.Choice{{Label: "Allow once", Data: "perm:1:once"}, {Label: "Always in this chat", Data: "perm:1:session"},
		{Label: "Always", Data: "perm:1:always"}, {Label: "Deny", Data: "perm:1:deny"}}
	sent, err := a.SendChoices(ctx, adapters.Outbound{ChatID: channel, Text: "May I use gh__list?"}, choices)
	if err != nil {
		t.Fatal(err)
	}
	rows := srv.Components(sent.MessageID)
	if len(rows) != 1 || len(rows[0].Components) != 4 || rows[0].Components[0].Style != 1 || rows[0].Components[3].Style != 2 ||
		rows[0].Components[1].Label != "Always in this chat" || rows[0].Components[1].CustomID != "perm:1:session" {
		t.Fatalf("components %+v", rows)
	}

	for n, tc := range []struct{ guild, name string }{{guild, "in a guild"}, {"", "in a DM"}} {
		t.Run(tc.name, func(t *testing.T) {
			id := srv.Press(tc.guild, sent.MessageID, discordtest.User{ID: "1500000000000000001", Username: "ann", GlobalName: "Ann"}, "perm:1:session")
			var p adapters.Press
			select {
			case p = <-s.presses:
			case <-ctx.Done():
				t.Fatal("no press reached the sink")
			}
			want := adapters.Press{Adapter: "dc-test", Surface: "discord", ChatID: channel, UserID: "1500000000000000001",
				DisplayName: "Ann", MessageID: sent.MessageID, Data: "perm:1:session", Group: tc.guild != ""}
			if p != want {
				t.Fatalf("press %+v\nwant %+v", p, want)
			}
			resps, err := srv.WaitInteractionResponses(ctx, n+1)
			if err != nil {
				t.Fatal(err)
			}
			if r := resps[n]; r.InteractionID != id || r.Type != 4 || r.Content != "Allowed once" || r.Flags != 64 {
				t.Fatalf("interaction response %+v", r)
			}
		})
	}

	if err := a.CloseChoices(ctx, channel, sent.MessageID, "May I use gh__list? Allowed once"); err != nil {
		t.Fatal(err)
	}
	if rows := srv.Components(sent.MessageID); len(rows) != 0 {
		t.Fatalf("buttons left after closing: %+v", rows)
	}
	if e := srv.Edits(); len(e) != 1 || e[0].Content != "May I use gh__list? Allowed once" {
		t.Fatalf("edits %+v", e)
	}
	if _, err := a.SendChoices(ctx, adapters.Outbound{ChatID: channel, Text: "?"}, []adapters.Choice{{Label: "x"}}); err == nil {
		t.Fatal("a button without data went out")
	}
}
