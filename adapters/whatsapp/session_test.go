package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/parleyd/parley/adapters"
)

// runSession runs a session of fc in the background; stop ends it and
// returns how it ended.
func runSession(t *testing.T, a *Adapter, fc *fakeClient, sink adapters.Sink) (stop func() end, done <-chan end) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan end, 1)
	go func() { ch <- a.session(ctx, fc, sink) }()
	fc.waitFor(t, "the session to connect", func(f *fakeClient) bool { return f.connects > 0 })
	stopped := false
	stop = func() end {
		t.Helper()
		if !stopped {
			stopped = true
			cancel()
		}
		select {
		case e := <-ch:
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("session did not stop")
			return 0
		}
	}
	t.Cleanup(func() { cancel() })
	return stop, ch
}

func TestDeliveryRetriesUntilStoredThenReadReceipt(t *testing.T) {
	fc := newFakeClient()
	clock := newFakeClock(true)
	a, logs := testAdapter(t, "", fc, clock, adapters.Deps{})
	sink := &recordingSink{fails: 3, err: errors.New("database is locked")}
	sink.before = func() {
		if n := fc.readCount(); n != 0 {
			t.Errorf("%d read receipts before the message was stored", n)
		}
	}
	stop, _ := runSession(t, a, fc, sink)

	if !fc.emit(dm("D1", text("hello"))) {
		t.Fatal("the handler failed a message the sink took in the end")
	}
	if sink.calls != 4 || len(sink.got) != 1 || sink.got[0].MessageID != "D1" {
		t.Fatalf("sink saw %d calls, stored %+v", sink.calls, sink.got)
	}
	if w := clock.waitWaits(t, 3); fmt.Sprint(w) != "[1ms 2ms 3ms]" {
		t.Fatalf("retry waits %v", w)
	}
	fc.mu.Lock()
	reads := fc.reads
	fc.mu.Unlock()
	if len(reads) != 1 || len(reads[0].ids) != 1 || reads[0].ids[0] != "D1" || reads[0].chat != alicePN || reads[0].sender != alicePN {
		t.Fatalf("read receipts %+v", reads)
	}
	if !strings.Contains(logs.String(), "whatsapp message not stored; retrying") {
		t.Fatalf("no retry logged:\n%s", logs)
	}
	if e := stop(); e != endStopped {
		t.Fatalf("ended %v", e)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.handlers) != 0 || fc.connected {
		t.Fatalf("after stop: %d handlers, connected %v", len(fc.handlers), fc.connected)
	}
}

func TestMessageNotStoredBeforeStopStaysUnacknowledged(t *testing.T) {
	fc := newFakeClient()
	clock := newFakeClock(false)
	a, _ := testAdapter(t, "", fc, clock, adapters.Deps{})
	sink := &recordingSink{fails: -1, err: errors.New("gateway is shutting down")}
	stop, _ := runSession(t, a, fc, sink)

	handled := make(chan bool, 1)
	go func() { handled <- fc.emit(inGroup("D2", bobPN, text("hi all"))) }()
	clock.waitWaits(t, 1) // the first retry is waiting
	if e := stop(); e != endStopped {
		t.Fatalf("ended %v", e)
	}
	if ok := <-handled; ok {
		t.Fatal("a message the sink never stored was acknowledged")
	}
	if n := fc.readCount(); n != 0 {
		t.Fatalf("%d read receipts for a message not stored", n)
	}
}

func TestReceiveWithoutReadReceipts(t *testing.T) {
	fc := newFakeClient()
	a, _ := testAdapter(t, "read_receipts: false", fc, newFakeClock(true), adapters.Deps{})
	sink := &recordingSink{}
	runSession(t, a, fc, sink)
	if !fc.emit(dm("D3", text("hello"))) || len(sink.got) != 1 {
		t.Fatalf("not delivered: %+v", sink.got)
	}
	if n := fc.readCount(); n != 0 {
		t.Fatalf("%d read receipts with read_receipts: false", n)
	}
}

func TestReceiveSkipsAndRefusals(t *testing.T) {
	fc := newFakeClient()
	a, logs := testAdapter(t, "", fc, newFakeClock(true), adapters.Deps{})
	sink := &recordingSink{}
	runSession(t, a, fc, sink)

	own := dm("D4", text("typed on the phone"))
	own.Info.IsFromMe = true
	status := dm("D5", text("status"))
	status.Info.Chat = types.StatusBroadcastJID
	for _, evt := range []*events.Message{own, status} {
		if !fc.emit(evt) {
			t.Fatalf("%s: a skipped message must still be acknowledged", evt.Info.ID)
		}
	}
	if sink.calls != 0 || fc.readCount() != 0 {
		t.Fatalf("skipped messages reached the sink (%d) or were marked read (%d)", sink.calls, fc.readCount())
	}

	sink.mu.Lock()
	sink.fails, sink.err = 1, fmt.Errorf("%w: text is not valid UTF-8", adapters.ErrInvalidInbound)
	sink.mu.Unlock()
	if !fc.emit(dm("D6", text("bad"))) {
		t.Fatal("a message the gateway can never take must not block the ones behind it")
	}
	if sink.calls != 1 || fc.readCount() != 0 {
		t.Fatalf("refused message: %d calls, %d read receipts", sink.calls, fc.readCount())
	}
	if !strings.Contains(logs.String(), "whatsapp message refused by the gateway; dropped") {
		t.Fatalf("refusal not logged:\n%s", logs)
	}
}

func TestHealthAndReconnect(t *testing.T) {
	fc := newFakeClient()
	fc.connectErrs = []error{errors.New("dial tcp: no route to host"), errors.New("dial tcp: no route to host")}
	clock := newFakeClock(false)
	a, logs := testAdapter(t, "reconnect: {min: 1s, max: 3s}", fc, clock, adapters.Deps{})
	stop, _ := runSession(t, a, fc, &recordingSink{})
	is := func(want string) func(bool, string) bool {
		return func(ok bool, detail string) bool { return !ok && detail == want }
	}
	connected := func(ok bool, detail string) bool { return ok && detail == "connected" }

	waitHealth(t, a, "first failure", is("disconnected: dial tcp: no route to host; reconnecting in 1s"))
	clock.waitWaits(t, 1)
	clock.fire()
	waitHealth(t, a, "second failure", is("disconnected: dial tcp: no route to host; reconnecting in 2s"))
	clock.waitWaits(t, 2)
	clock.fire()
	fc.waitFor(t, "the third connect", func(f *fakeClient) bool { return f.connects == 3 && f.connected })
	waitHealth(t, a, "connecting", is("connecting"))

	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected", connected)
	fc.waitFor(t, "presence", func(f *fakeClient) bool { return len(f.presences) == 1 && f.presences[0] == types.PresenceAvailable })

	// A dropped connection: back off from reconnect.min again.
	fc.setConnected(false)
	fc.emit(&events.Disconnected{})
	waitHealth(t, a, "disconnected", is("disconnected; reconnecting in 1s"))
	clock.waitWaits(t, 3)
	clock.fire()
	fc.waitFor(t, "a reconnect", func(f *fakeClient) bool { return f.connects == 4 })
	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected again", connected)

	// A Disconnected from an older socket, while connected, is no news;
	// dead keepalives are.
	fc.emit(&events.Disconnected{})
	fc.emit(&events.KeepAliveTimeout{ErrorCount: 9, LastSuccess: time.Now().Add(-10 * time.Minute)})
	waitHealth(t, a, "keepalives failing", is("disconnected: keepalives failing; reconnecting in 1s"))
	if w := clock.waitWaits(t, 4); len(w) != 4 {
		t.Fatalf("waits %v: the stale Disconnected caused a reconnect", w)
	}
	clock.fire()
	fc.waitFor(t, "a reconnect", func(f *fakeClient) bool { return f.connects == 5 })
	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected again", connected)

	fc.emit(&events.TemporaryBan{Code: events.TempBanSentToTooManyPeople, Expire: 90 * time.Second})
	waitHealth(t, a, "banned", func(ok bool, d string) bool { return !ok && strings.HasPrefix(d, "temporarily banned: ") })
	if w := clock.waitWaits(t, 5); w[4] != 90*time.Second {
		t.Fatalf("waited %v after a 90s ban", w[4])
	}
	clock.fire()
	fc.waitFor(t, "a reconnect", func(f *fakeClient) bool { return f.connects == 6 })

	fc.emit(&events.ConnectFailure{Reason: events.ConnectFailureServiceUnavailable})
	waitHealth(t, a, "connect failure", func(ok bool, d string) bool {
		return !ok && strings.HasPrefix(d, "connect failure: 503") && strings.HasSuffix(d, "reconnecting in 1s")
	})
	clock.waitWaits(t, 6)
	clock.fire()
	fc.waitFor(t, "a reconnect", func(f *fakeClient) bool { return f.connects == 7 })

	fc.emit(&events.ClientOutdated{})
	waitHealth(t, a, "outdated", func(ok bool, d string) bool { return !ok && strings.HasPrefix(d, "client outdated") })
	if w := clock.waitWaits(t, 7); w[6] != 3*time.Second {
		t.Fatalf("outdated client waited %v, want reconnect.max", w[6])
	}

	if e := stop(); e != endStopped {
		t.Fatalf("ended %v", e)
	}
	for _, line := range []string{"whatsapp connect failed", "whatsapp connected", "whatsapp disconnected", "whatsapp account temporarily banned"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q", line)
		}
	}
}

func TestLoggedOutEndsTheSession(t *testing.T) {
	fc := newFakeClient()
	a, logs := testAdapter(t, "", fc, newFakeClock(true), adapters.Deps{})
	_, done := runSession(t, a, fc, &recordingSink{})
	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected", func(ok bool, d string) bool { return ok })
	fc.emit(&events.LoggedOut{OnConnect: false, Reason: events.ConnectFailureLoggedOut})
	select {
	case e := <-done:
		if e != endLoggedOut {
			t.Fatalf("ended %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("session went on after logout")
	}
	if ok, d := a.Health(); ok || d != "logged out: link again with `parley whatsapp link --adapter wa`" {
		t.Fatalf("health %v %q", ok, d)
	}
	if !strings.Contains(logs.String(), "whatsapp logged out: link again with parley whatsapp link") {
		t.Fatalf("no clear log line:\n%s", logs)
	}
	if _, err := a.Send(context.Background(), adapters.Outbound{ChatID: alicePN.String(), Text: "hi"}); !errors.Is(err, ErrNotConnected) ||
		!strings.Contains(err.Error(), "logged out") {
		t.Fatalf("send after logout: %v", err)
	}
}

func TestStreamReplacedStopsReconnecting(t *testing.T) {
	fc := newFakeClient()
	a, _ := testAdapter(t, "", fc, newFakeClock(true), adapters.Deps{})
	_, done := runSession(t, a, fc, &recordingSink{})
	fc.emit(&events.Connected{})
	fc.emit(&events.StreamReplaced{})
	select {
	case e := <-done:
		if e != endReplaced {
			t.Fatalf("ended %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("session went on after being replaced")
	}
	if ok, d := a.Health(); ok || !strings.HasPrefix(d, "replaced: another client") {
		t.Fatalf("health %v %q", ok, d)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.connects != 1 {
		t.Fatalf("%d connects; a replaced session must not fight back", fc.connects)
	}
}

func TestPresenceWaitsForTheAccountName(t *testing.T) {
	fc := newFakeClient()
	fc.presenceErr = whatsmeow.ErrNoPushName
	a, _ := testAdapter(t, "", fc, newFakeClock(true), adapters.Deps{})
	runSession(t, a, fc, &recordingSink{})
	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected", func(ok bool, d string) bool { return ok })
	fc.emit(&events.PushNameSetting{})
	fc.waitFor(t, "presence after the name", func(f *fakeClient) bool { return len(f.presences) == 1 })
}

func TestPresenceOff(t *testing.T) {
	fc := newFakeClient()
	a, _ := testAdapter(t, "presence: false", fc, newFakeClock(true), adapters.Deps{})
	runSession(t, a, fc, &recordingSink{})
	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected", func(ok bool, d string) bool { return ok })
	if err := a.Typing(context.Background(), alicePN.String()); err != nil {
		t.Fatal(err)
	}
	fc.emit(&events.PushNameSetting{}) // a round trip through the loop
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.presences) != 0 || len(fc.chatStates) != 0 {
		t.Fatalf("presence %v, typing %v with presence: false", fc.presences, fc.chatStates)
	}
}

// A session that ends (here: logged out) lets go of a delivery still
// retrying, unacknowledged, instead of hanging on to the connection.
func TestSessionEndReleasesARetryingDelivery(t *testing.T) {
	fc := newFakeClient()
	clock := newFakeClock(false)
	a, _ := testAdapter(t, "", fc, clock, adapters.Deps{})
	_, done := runSession(t, a, fc, &recordingSink{fails: -1, err: errors.New("disk I/O error")})
	handled := make(chan bool, 1)
	go func() { handled <- fc.emit(dm("D7", text("hi"))) }()
	clock.waitWaits(t, 1)
	fc.emit(&events.LoggedOut{Reason: events.ConnectFailureLoggedOut})
	select {
	case e := <-done:
		if e != endLoggedOut {
			t.Fatalf("ended %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the session hung on a delivery")
	}
	if <-handled {
		t.Fatal("acknowledged a message never stored")
	}
}

func TestConnectAnswers(t *testing.T) {
	t.Run("already connected", func(t *testing.T) {
		fc := newFakeClient()
		fc.connected, fc.loggedIn = true, true
		fc.connectErrs = []error{whatsmeow.ErrAlreadyConnected}
		a, _ := testAdapter(t, "", fc, newFakeClock(true), adapters.Deps{})
		runSession(t, a, fc, &recordingSink{})
		waitHealth(t, a, "connected", func(ok bool, d string) bool { return ok && d == "connected" })
	})
	t.Run("device deleted", func(t *testing.T) {
		fc := newFakeClient()
		fc.connectErrs = []error{store.ErrDeviceDeleted}
		a, _ := testAdapter(t, "", fc, newFakeClock(true), adapters.Deps{})
		_, done := runSession(t, a, fc, &recordingSink{})
		select {
		case e := <-done:
			if e != endLoggedOut {
				t.Fatalf("ended %v", e)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("kept connecting a deleted device")
		}
	})
}
