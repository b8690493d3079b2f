package gateway_test

import (
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
)

// People approved, waiting and blocked are listed by name; a revoked
// person's next message gets a pairing code again, and a blocked one's
// gets nothing, not even with the config's allow list naming them; an
// unblocked one may ask again.
func TestRevokeAndBlock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		r := newRig(t, open(t), echoRun, func(o *gateway.Options) {
			o.Access = map[adapters.ID]gateway.Access{"tg": {DM: gateway.DMPairing, Allow: map[string]bool{"7": true}}}
		})
		r.deliver(dm("5", "p-1", "hello"))
		code := codeInReply.FindStringSubmatch(r.sent(1)[0])
		if code == nil {
			t.Fatal("no pairing code")
		}
		if _, err := r.store.ApprovePairing(r.ctx, code[1]); err != nil {
			t.Fatal(err)
		}
		r.sent(2) // the approval's line
		r.deliver(dm("6", "q-1", "me too"))
		r.sent(3)
		people, err := r.store.People(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(people) != 2 || people[0].Label() != "U5" || people[0].State != gateway.PersonApproved ||
			people[1].Label() != "U6" || people[1].State != gateway.PersonPending || people[1].Code == "" {
			t.Fatalf("people: %+v", people)
		}

		if ok, err := r.store.Revoke(r.ctx, "tg", "5"); err != nil || !ok {
			t.Fatalf("revoke: %v %v", ok, err)
		}
		if ok, err := r.store.Revoke(r.ctx, "tg", "5"); err != nil || ok {
			t.Fatalf("revoke twice: %v %v", ok, err)
		}
		r.deliver(dm("5", "p-2", "still there?"))
		if got := r.sent(4)[3]; !codeInReply.MatchString(got) {
			t.Fatalf("a revoked person's message got %q, not a pairing code", got)
		}

		// Blocked: the waiting request goes, and nothing answers, even
		// for one the config allows.
		for _, user := range []string{"5", "7"} {
			if ok, err := r.store.Block(r.ctx, "tg", user); err != nil || !ok {
				t.Fatalf("block %s: %v %v", user, ok, err)
			}
		}
		deniedBefore := r.gw.Denied()
		r.deliver(dm("5", "p-3", "hello?"))
		r.deliver(dm("7", "s-1", "hi, the config knows me"))
		waitUnfinished(t, r.store, 0)
		if got := r.rec.Sent(); len(got) != 4 {
			t.Fatalf("a blocked person was answered: %v", got[4:])
		}
		if got := r.gw.Denied() - deniedBefore; got != 2 {
			t.Fatalf("denied %d, want 2", got)
		}
		people, err = r.store.People(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]string{}
		for _, p := range people {
			states[p.Label()] = p.State
		}
		if len(people) != 3 || states["U5"] != gateway.PersonBlocked || states["7"] != gateway.PersonBlocked || states["U6"] != gateway.PersonPending {
			t.Fatalf("people after the blocks: %+v", people)
		}
		if ok, err := r.store.Unblock(r.ctx, "tg", "5"); err != nil || !ok {
			t.Fatalf("unblock: %v %v", ok, err)
		}
		r.deliver(dm("5", "p-4", "again"))
		if got := r.sent(5)[4]; !codeInReply.MatchString(got) {
			t.Fatalf("an unblocked person's message got %q, not a pairing code", got)
		}
	})
}
