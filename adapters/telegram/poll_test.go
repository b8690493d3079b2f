package telegram

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	tt "github.com/parleyd/parley/adapters/telegram/telegramtest"
)

func TestPollingDeliversThenAcknowledges(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	h := newHarness(t, srv, testToken, "poll_timeout: 1")
	ctx := testContext(t)

	first := srv.Inject(textUpdate(42, 1, "hello"))
	srv.Inject(textUpdate(43, 1, "hi"))
	last := srv.Inject(textUpdate(42, 2, "again"))
	s := newSink()
	stop := h.start(s)
	got, err := s.waitTaken(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	// The next getUpdates confirms the batch.
	if err := srv.WaitFor(ctx, func() bool { return srv.Confirmed() == last+1 }); err != nil {
		t.Fatalf("offset never moved past the batch: confirmed %d, want %d", srv.Confirmed(), last+1)
	}
	if err := h.waitHealth(ctx, func(ok bool, detail string) bool { return ok && detail == "polling as @parley_test_bot" }); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if ok, detail := h.a.Health(); ok || detail != "stopped" {
		t.Fatalf("Health() after stop = %v, %q", ok, detail)
	}
	polls := srv.Polls()
	if polls[0].Offset != 0 || polls[0].Timeout != 1 || polls[0].Limit != 100 || polls[0].AllowedUpdates != `["message","edited_message","callback_query"]` {
		t.Fatalf("first poll %+v", polls[0])
	}
	for _, p := range polls[1:] {
		if p.Offset != last+1 {
			t.Fatalf("poll offsets %+v, want %d after the first", polls, last+1)
		}
	}
	// Per chat, in order.
	var chat42 []string
	for _, in := range got {
		if in.ChatID == "42" {
			chat42 = append(chat42, in.Text)
		}
	}
	if strings.Join(chat42, ",") != "hello,again" || first >= last {
		t.Fatalf("chat 42 got %v", chat42)
	}
	if srv.Calls("getMe") != 1 || srv.Calls("deleteWebhook") != 1 {
		t.Fatalf("getMe %d, deleteWebhook %d", srv.Calls("getMe"), srv.Calls("deleteWebhook"))
	}
}

func TestOffsetWaitsForDelivery(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	h := newHarness(t, srv, testToken, "poll_timeout: 1")
	ctx := testContext(t)

	// Chat 42 fails once; chat 43 in the same batch does not.
	a1 := srv.Inject(textUpdate(42, 1, "one"))
	b1 := srv.Inject(textUpdate(43, 1, "other chat"))
	a2 := srv.Inject(textUpdate(42, 2, "two"))
	s := newSink()
	failed := false
	var order []string
	s.fail = func(n int, in adapters.Inbound) error {
		order = append(order, in.ChatID+"/"+in.MessageID)
		if in.ChatID == "42" && !failed {
			failed = true
			return errors.New("database is down")
		}
		return nil
	}
	h.start(s)
	got, err := s.waitTaken(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitFor(ctx, func() bool { return srv.Confirmed() == a2+1 }); err != nil {
		t.Fatalf("confirmed %d, want %d", srv.Confirmed(), a2+1)
	}
	polls := srv.Polls()
	// The getUpdates after the failure carries an offset that doesn't
	// confirm the failed update, so Telegram keeps it and sends it again.
	if len(polls) < 3 || polls[0].Offset != 0 || polls[1].Offset > a1 {
		t.Fatalf("polls %+v: the poll after the failed delivery must not confirm update %d", polls, a1)
	}
	// The failed message came again, same ids; the other chat's message
	// was delivered once; chat 42 stayed in order.
	var seq42 []string
	b1Calls := 0
	for _, o := range order {
		if strings.HasPrefix(o, "42/") {
			seq42 = append(seq42, o)
		}
		if o == "43/1" {
			b1Calls++
		}
	}
	if strings.Join(seq42, ",") != "42/1,42/1,42/2" {
		t.Fatalf("chat 42 deliveries %v, want 42/1 twice then 42/2", seq42)
	}
	if b1Calls != 1 {
		t.Fatalf("chat 43 delivered %d times, want once", b1Calls)
	}
	if len(got) != 3 {
		t.Fatalf("taken %+v", got)
	}
	if !strings.Contains(h.log.String(), "database is down") {
		t.Fatalf("the failure is not logged:\n%s", h.log)
	}
	if a1 >= b1 || b1 >= a2 {
		t.Fatalf("update ids %d %d %d", a1, b1, a2)
	}
}

func TestKilledBeforeAckDeliversAgain(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	ctx := testContext(t)
	id := srv.Inject(textUpdate(42, 7, "remember me"))

	// The first life takes the message, then dies before its ack reaches
	// Telegram: the process is stopped from inside Deliver, and the calls
	// after it are dropped, as for a process killed.
	h1 := newHarness(t, srv, testToken, "poll_timeout: 1")
	s1 := newSink()
	life1, kill := context.WithCancel(ctx)
	s1.fail = func(n int, in adapters.Inbound) error {
		for range 5 {
			srv.Fail("getUpdates", tt.Failure{Drop: true})
		}
		kill()
		return nil
	}
	if err := h1.a.Start(life1, s1); err != nil {
		t.Fatal(err)
	}
	first := s1.taken()
	if len(first) != 1 {
		t.Fatalf("first life took %d", len(first))
	}
	if srv.Confirmed() > id || srv.Pending() != 1 {
		t.Fatalf("acknowledged without a getUpdates reaching Telegram: confirmed %d, pending %d", srv.Confirmed(), srv.Pending())
	}
	if !strings.Contains(h1.log.String(), "taken but not confirmed at stop") {
		t.Fatalf("the failed ack is not logged:\n%s", h1.log)
	}

	srv.ClearFailures()
	h2 := newHarness(t, srv, testToken, "poll_timeout: 1")
	s2 := newSink()
	h2.start(s2)
	again, err := s2.waitTaken(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The gateway dedupes by (adapter, chat, message id): they must match.
	if again[0].Adapter != first[0].Adapter || again[0].ChatID != first[0].ChatID || again[0].MessageID != first[0].MessageID || again[0].Text != "remember me" {
		t.Fatalf("redelivered %+v, first %+v", again[0], first[0])
	}
	if err := srv.WaitFor(ctx, func() bool { return srv.Confirmed() == id+1 && srv.Pending() == 0 }); err != nil {
		t.Fatalf("second life never acknowledged: confirmed %d", srv.Confirmed())
	}
}

func TestStopAcknowledgesWhatWasTaken(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	ctx := testContext(t)
	id := srv.Inject(textUpdate(42, 7, "bye"))
	h := newHarness(t, srv, testToken, "poll_timeout: 1")
	s := newSink()
	ctxStop, cancel := context.WithCancel(ctx)
	s.fail = func(int, adapters.Inbound) error { cancel(); return nil }
	done := make(chan error, 1)
	go func() { done <- h.a.Start(ctxStop, s) }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if srv.Confirmed() != id+1 || len(s.taken()) != 1 {
		t.Fatalf("confirmed %d, want %d; taken %d", srv.Confirmed(), id+1, len(s.taken()))
	}
}

func TestInvalidAndIgnoredUpdatesAreSkipped(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	ctx := testContext(t)
	h := newHarness(t, srv, testToken, "poll_timeout: 1")
	srv.InjectRaw([]byte(`{"update_id":5,"edited_message":{"message_id":1,"date":1,"chat":{"id":42,"type":"private"},"text":"edit"}}`))
	srv.InjectRaw([]byte(`{"update_id":6,"message":{"message_id":"not a number"}}`))
	srv.InjectRaw([]byte(`{"update_id":7,"message":{"message_id":2,"date":1,"chat":{"id":42,"type":"private"},"from":{"id":42,"is_bot":false,"first_name":"A"},"text":"ok"}}`))
	s := newSink()
	h.start(s)
	got, err := s.waitTaken(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitFor(ctx, func() bool { return srv.Confirmed() == 8 }); err != nil {
		t.Fatalf("stuck behind an update it can't take: confirmed %d", srv.Confirmed())
	}
	if len(got) != 1 || got[0].Text != "ok" {
		t.Fatalf("taken %+v", got)
	}
	if !strings.Contains(h.log.String(), "update_id=6") {
		t.Fatalf("the unreadable update is not logged:\n%s", h.log)
	}
}

func TestGatewayRefusalIsNotRetried(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	ctx := testContext(t)
	h := newHarness(t, srv, testToken, "poll_timeout: 1")
	id := srv.Inject(textUpdate(42, 1, "x"))
	s := newSink()
	s.fail = func(int, adapters.Inbound) error { return adapters.ErrInvalidInbound }
	h.start(s)
	if err := srv.WaitFor(ctx, func() bool { return srv.Confirmed() == id+1 }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wait(ctx, func(calls int, _ []adapters.Inbound) bool { return calls == 1 }); err != nil {
		t.Fatal(err)
	}
}

func TestPollingRecoversFromErrors(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	ctx := testContext(t)
	srv.Fail("getMe", tt.Failure{Drop: true})
	srv.Fail("getUpdates", tt.Failure{Code: 502, Description: "Bad Gateway"})
	srv.Fail("getUpdates", tt.Failure{Code: 409, Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"})
	srv.Fail("getUpdates", tt.Failure{Code: 429, Description: "Too Many Requests: retry after 1", RetryAfter: 1})
	srv.Inject(textUpdate(42, 1, "through"))
	h := newHarness(t, srv, testToken, "poll_timeout: 1")
	s := newSink()
	began := time.Now()
	h.start(s)
	if _, err := s.waitTaken(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited < time.Second {
		t.Fatalf("retry_after 1 not honoured: delivered after %s", waited)
	}
	logs := h.log.String()
	if !strings.Contains(logs, "another process polls this bot") || !strings.Contains(logs, "Bad Gateway") {
		t.Fatalf("logs:\n%s", logs)
	}
}

func TestWrongTokenStopsStart(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	const wrong = "987654321:AAWrongTokenWrongTokenWrongToken123"
	h := newHarness(t, srv, wrong, "")
	err := h.a.Start(testContext(t), newSink())
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Start = %v, want ErrUnauthorized", err)
	}
	if !strings.Contains(err.Error(), "token") || strings.Contains(err.Error(), "AAWrong") {
		t.Fatalf("error %q must name the token without showing it", err)
	}
	if strings.Contains(h.log.String(), "AAWrong") {
		t.Fatalf("token in logs:\n%s", h.log)
	}
	if ok, detail := h.a.Health(); ok || !strings.Contains(detail, "401") || strings.Contains(detail, "AAWrong") {
		t.Fatalf("Health() = %v, %q", ok, detail)
	}
}

func TestSwitchingToPollingDropsTheWebhook(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	ctx := testContext(t)
	wh := newHarness(t, srv, testToken, "mode: webhook\nwebhook: {url: 'https://bot.example.com/tg', secret_token: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}")
	stop := wh.start(newSink())
	if err := srv.WaitFor(ctx, func() bool { return srv.Webhook().URL != "" }); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	srv.Inject(textUpdate(42, 1, "polled"))
	h := newHarness(t, srv, testToken, "poll_timeout: 1")
	s := newSink()
	h.start(s)
	if _, err := s.waitTaken(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if srv.Webhook().URL != "" {
		t.Fatal("webhook still set")
	}
}
