package gateway_test

import (
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// A file sent in a group without addressing the bot is kept with the
// message as context: its part names it, though no turn read it.
func TestGroupContextKeepsFiles(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		r := newRig(t, open(t), echoRun, func(o *gateway.Options) {
			o.Access = map[adapters.ID]gateway.Access{"tg": {DM: gateway.DMAllowlist, Group: gateway.GroupMention, Groups: gateway.GroupsOpen}}
		})
		in := group("9", "a", "", false)
		in.Files = []adapters.FileRef{{ID: "f1", Name: "minutes.pdf", MediaType: "application/pdf", Size: 4096}}
		r.deliver(in)
		waitUnfinished(t, r.store, 0)
		s, err := r.sess.Active(r.ctx, gateway.SessionKey(in, "default"))
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := r.sess.Messages(r.ctx, s.ID, sessions.MessagesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || len(msgs[0].Parts) != 1 {
			t.Fatalf("stored %+v", msgs)
		}
		p := msgs[0].Parts[0]
		if d, ok := p.File(); !ok || p.Name != "minutes.pdf" || p.MediaType != "application/pdf" || d.ID != "f1" || d.Size != 4096 {
			t.Fatalf("stored part %+v", p)
		}
	})
}
