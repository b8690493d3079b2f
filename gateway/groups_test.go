package gateway_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
)

// The attacker's reproduction: an unapproved person who mentions the bot
// in a group it was added to is not answered, under the default groups
// policy (pairing). A stranger's /pair changes nothing; an approved
// person (listed in allow, or approved by pairing) is told how to let the
// group in, pairs it with /pair, and from then on its members are
// answered, until /unpair.
func TestGroupsArePairedByAnApprovedPerson(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		var turns atomic.Int64
		r := newRig(t, open(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
			turns.Add(1)
			return "echo: " + in.Messages[0].Attributed(), nil
		}, func(o *gateway.Options) {
			o.Access = map[adapters.ID]gateway.Access{"tg": {DM: gateway.DMPairing, Group: gateway.GroupMention, Allow: map[string]bool{"1": true}}}
		})
		n := 0
		reply := func(in adapters.Inbound) string {
			t.Helper()
			r.deliver(in)
			n++
			return r.sent(n)[n-1]
		}
		quiet := func(in adapters.Inbound) {
			t.Helper()
			r.deliver(in)
			waitUnfinished(t, r.store, 0)
			if got := r.rec.Sent(); len(got) != n {
				t.Fatalf("%q was answered: %v", in.Text, got[n:])
			}
		}
		quiet(group("9", "1", "@bot what does the paid model say?", true))
		quiet(group("9", "2", "/pair", true))
		quiet(group("9", "3", "chatter", false))
		if turns.Load() != 0 {
			t.Fatalf("%d turns ran in a group nobody let in", turns.Load())
		}
		if got := reply(group("1", "4", "@bot hi", true)); !strings.Contains(got, "Send /pair here") {
			t.Fatalf("an approved person in a group not let in was told %q", got)
		}
		if got := reply(group("1", "5", "@bot /pair", true)); !strings.HasPrefix(got, "Paired") {
			t.Fatalf("/pair answered %q", got)
		}
		if got := reply(group("9", "6", "@bot hi", true)); got != "echo: U9: @bot hi" {
			t.Fatalf("a member of a paired group was answered %q", got)
		}
		if got := reply(group("1", "7", "/unpair", true)); !strings.HasPrefix(got, "Unpaired") {
			t.Fatalf("/unpair answered %q", got)
		}
		quiet(group("9", "8", "@bot again?", true))

		// A person an operator approved by pairing may pair a group too.
		code := codeInReply.FindStringSubmatch(reply(dm("5", "9", "hello")))
		if code == nil {
			t.Fatal("no pairing code")
		}
		if _, err := r.store.ApprovePairing(r.ctx, code[1]); err != nil {
			t.Fatal(err)
		}
		n++ // "You're approved"
		r.sent(n)
		if got := reply(group("5", "10", "/pair", true)); !strings.HasPrefix(got, "Paired") {
			t.Fatalf("/pair by a person approved by pairing answered %q", got)
		}
		if turns.Load() != 1 {
			t.Fatalf("%d turns ran, want 1", turns.Load())
		}
	})
}

// Under groups.policy allowlist only the listed groups are let in, and
// /pair lets in no other; under open, any group is.
func TestGroupsAllowlistAndOpen(t *testing.T) {
	r := newRig(t, dbtest.SQLite(t), echoRun, func(o *gateway.Options) {
		o.Access = map[adapters.ID]gateway.Access{
			"tg":  {DM: gateway.DMAllowlist, Group: gateway.GroupMention, Allow: map[string]bool{"1": true}, Groups: gateway.GroupsAllowlist, AllowGroups: map[string]bool{"g1": true}},
			"tg2": {DM: gateway.DMAllowlist, Group: gateway.GroupMention, Groups: gateway.GroupsOpen},
		}
	})
	r.deliver(group("9", "1", "@bot hi", true))
	if got := r.sent(1)[0]; got != "echo: @bot hi" {
		t.Fatalf("a listed group: %q", got)
	}
	other := group("1", "2", "/pair", true)
	other.ChatID = "g2"
	r.deliver(other)
	if got := r.sent(2)[1]; !strings.Contains(got, "groups.allow") {
		t.Fatalf("/pair under allowlist: %q", got)
	}
	stranger := group("9", "3", "@bot hi", true)
	stranger.ChatID = "g2"
	r.deliver(stranger)
	waitUnfinished(t, r.store, 0)
	if got := r.rec.Sent(); len(got) != 2 {
		t.Fatalf("an unlisted group was answered: %v", got[2:])
	}
	open := group("9", "4", "@bot hi", true)
	open.Adapter, open.ChatID = "tg2", "g3"
	r.deliver(open)
	waitUnfinished(t, r.store, 0)
	if got := r.gw.Denied(); got != 1 {
		t.Fatalf("denied %d, want 1 (the unlisted group)", got)
	}
}
