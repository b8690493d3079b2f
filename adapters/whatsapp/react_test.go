package whatsapp

import (
	"context"
	"testing"

	"go.mau.fi/whatsmeow/types"
)

// A reaction on a message received is a reaction message keyed to it; in
// a group it names the message's sender, as WhatsApp requires; taken away,
// it is the same message with no emoji.
func TestReactions(t *testing.T) {
	a, fc, sink := connectedAdapter(t, "")
	ctx := context.Background()
	bob := types.JID{User: bobPN.User, Server: types.DefaultUserServer, Device: 2}
	if !fc.emit(inGroup("3EB0GROUPMSG", bob, text("@bot hello"))) || !fc.emit(dm("3EB0DIRECTMSG", text("hi"))) || len(sink.got) != 2 {
		t.Fatal("not delivered")
	}
	for _, tc := range []struct {
		name, chat, id, emoji, participant string
		unreact                            bool
	}{
		{"in a group", sink.got[0].ChatID, sink.got[0].MessageID, "👀", bobPN.String(), false},
		{"taken away in a group", sink.got[0].ChatID, sink.got[0].MessageID, "", bobPN.String(), true},
		{"in a direct chat", sink.got[1].ChatID, sink.got[1].MessageID, "👀", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.unreact {
				err = a.Unreact(ctx, tc.chat, tc.id, "👀")
			} else {
				err = a.React(ctx, tc.chat, tc.id, tc.emoji)
			}
			if err != nil {
				t.Fatal(err)
			}
			m := fc.lastSent(t)
			r := m.msg.GetReactionMessage()
			k := r.GetKey()
			if r == nil || m.to.String() != tc.chat || r.GetText() != tc.emoji || k.GetID() != tc.id || k.GetRemoteJID() != tc.chat ||
				k.GetFromMe() || k.GetParticipant() != tc.participant || r.GetSenderTimestampMS() == 0 {
				t.Fatalf("sent %v to %v", m.msg, m.to)
			}
		})
	}
	// A group message this process never saw: its sender isn't known.
	if err := a.React(ctx, sink.got[0].ChatID, "3EB0UNKNOWN", "👀"); err == nil {
		t.Fatal("reacted to a group message whose sender is unknown")
	}
}
