package telegram

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/parleyd/parley/adapters"
	tt "github.com/parleyd/parley/adapters/telegram/telegramtest"
)

// pressSink takes messages and presses, answering each press with a note.
type pressSink struct {
	mu      sync.Mutex
	presses []adapters.Press
	got     chan struct{}
}

func (s *pressSink) Deliver(context.Context, adapters.Inbound) error { return nil }

func (s *pressSink) Press(_ context.Context, p adapters.Press) string {
	s.mu.Lock()
	s.presses = append(s.presses, p)
	s.mu.Unlock()
	s.got <- struct{}{}
	return "Allowed once"
}

// A question goes out with its buttons, two a row; a press reaches the
// sink with who pressed where, and is answered with the sink's note;
// closing the question replaces its text and takes the buttons away.
func TestChoices(t *testing.T) {
	for _, mode := range []string{"polling", "webhook"} {
		t.Run(mode, func(t *testing.T) {
			var srv *tt.Server
			var h *harness
			if mode == "webhook" {
				srv, h, _ = webhookSetup(t)
			} else {
				srv = tt.NewServer()
				defer srv.Close()
				h = newHarness(t, srv, tt.Token, "")
			}
			ctx := testContext(t)
			sink := &pressSink{got: make(chan struct{}, 1)}
			h.start(sink)

			choices := []adapters.Choice{{Label: "Allow once", Data: "p:1:once"}, {Label: "Always in this chat", Data: "p:1:session"},
				{Label: "Always", Data: "p:1:always"}, {Label: "Deny", Data: "p:1:deny"}}
			sent, err := h.a.SendChoices(ctx, adapters.Outbound{ChatID: "-100777:topic:9", Text: "May I use **gh__list**?", ReplyTo: "5"}, choices)
			if err != nil {
				t.Fatal(err)
			}
			id, _ := strconv.Atoi(sent.MessageID)
			buttons := srv.Buttons("-100777", id)
			if len(buttons) != 2 || len(buttons[0]) != 2 || buttons[0][0] != (tt.Button{Text: "Allow once", CallbackData: "p:1:once"}) ||
				buttons[1][1] != (tt.Button{Text: "Deny", CallbackData: "p:1:deny"}) {
				t.Fatalf("buttons %+v", buttons)
			}
			if m := srv.Sent()[0]; m.ThreadID != 9 || m.ReplyTo != 5 || m.Text != "May I use <b>gh__list</b>?" {
				t.Fatalf("sent %+v", m)
			}

			// The press, as Telegram sends it (in a forum topic).
			raw := `{"id":"q1","from":{"id":31,"is_bot":false,"first_name":"Ann"},"chat_instance":"c",` +
				`"message":{"message_id":` + sent.MessageID + `,"message_thread_id":9,"is_topic_message":true,"date":1,` +
				`"chat":{"id":-100777,"type":"supergroup"},"text":"May I use gh__list?"},"data":"p:1:session"}`
			if mode == "webhook" {
				if err := srv.WaitFor(ctx, func() bool { return srv.Webhook().URL != "" }); err != nil {
					t.Fatal(err)
				}
				code, err := srv.PostWebhook(ctx, tt.Update{UpdateID: 5000, CallbackQuery: []byte(raw)})
				if err != nil || code != http.StatusOK {
					t.Fatalf("webhook answered %d, %v", code, err)
				}
			} else {
				srv.InjectRaw([]byte(`{"update_id":5000,"callback_query":` + raw + `}`))
			}
			select {
			case <-sink.got:
			case <-ctx.Done():
				t.Fatal("no press reached the sink")
			}
			want := adapters.Press{Adapter: "tg-test", Surface: "telegram", ChatID: "-100777:topic:9", UserID: "31", DisplayName: "Ann",
				MessageID: sent.MessageID, Data: "p:1:session", Group: true}
			if sink.presses[0] != want {
				t.Fatalf("press %+v\nwant %+v", sink.presses[0], want)
			}
			if err := srv.WaitFor(ctx, func() bool { return len(srv.CallbackAnswers()) == 1 }); err != nil {
				t.Fatal(err)
			}
			if a := srv.CallbackAnswers()[0]; a.QueryID != "q1" || a.Text != "Allowed once" {
				t.Fatalf("answer %+v", a)
			}

			if err := h.a.CloseChoices(ctx, "-100777:topic:9", sent.MessageID, "May I use gh__list? Allowed in this chat from now on."); err != nil {
				t.Fatal(err)
			}
			if b := srv.Buttons("-100777", id); b != nil {
				t.Fatalf("buttons left after closing: %+v", b)
			}
			// Closing again with the same text changes nothing, and is no error.
			if err := h.a.CloseChoices(ctx, "-100777:topic:9", sent.MessageID, "May I use gh__list? Allowed in this chat from now on."); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A sink that takes no presses: the button says so.
func TestPressWithoutPressSink(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	h := newHarness(t, srv, tt.Token, "")
	ctx := testContext(t)
	h.start(adapters.SinkFunc(func(context.Context, adapters.Inbound) error { return nil }))
	sent, err := h.a.SendChoices(ctx, adapters.Outbound{ChatID: "42", Text: "?"}, []adapters.Choice{{Label: "Yes", Data: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.Atoi(sent.MessageID)
	q := srv.Press(42, 42, id, "y")
	if err := srv.WaitFor(ctx, func() bool { return len(srv.CallbackAnswers()) == 1 }); err != nil {
		t.Fatal(err)
	}
	if a := srv.CallbackAnswers()[0]; a.QueryID != q || a.Text != "This button no longer does anything." {
		t.Fatalf("answer %+v", a)
	}
	if _, err := h.a.SendChoices(ctx, adapters.Outbound{ChatID: "42", Text: "?"}, []adapters.Choice{{Label: "Yes", Data: string(make([]byte, 65))}}); err == nil {
		t.Fatal("65 bytes of button data went out")
	}
}
