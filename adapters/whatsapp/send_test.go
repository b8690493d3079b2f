package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/parleyd/parley/adapters"
)

// connectedAdapter is an adapter whose session runs on fc, connected.
func connectedAdapter(t *testing.T, snippet string) (*Adapter, *fakeClient, *recordingSink) {
	t.Helper()
	fc := newFakeClient()
	a, _ := testAdapter(t, snippet, fc, newFakeClock(true), adapters.Deps{})
	sink := &recordingSink{}
	runSession(t, a, fc, sink)
	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected", func(ok bool, _ string) bool { return ok })
	return a, fc, sink
}

func (f *fakeClient) lastSent(t *testing.T) sentMessage {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sent) == 0 {
		t.Fatal("nothing sent")
	}
	return f.sent[len(f.sent)-1]
}

func TestSendText(t *testing.T) {
	a, fc, _ := connectedAdapter(t, "")
	for _, chat := range []string{alicePN.String(), groupJID.String(), "+49 151 00000002"} {
		sent, err := a.Send(context.Background(), adapters.Outbound{Adapter: "wa", ChatID: chat, Text: "hello there"})
		if err != nil {
			t.Fatalf("%s: %v", chat, err)
		}
		m := fc.lastSent(t)
		want, _ := parseChatID(chat)
		if m.to != want || m.msg.GetConversation() != "hello there" || m.msg.ExtendedTextMessage != nil || len(m.extra) != 0 {
			t.Fatalf("%s: sent %v to %v (extra %v)", chat, m.msg, m.to, m.extra)
		}
		if sent.MessageID == "" {
			t.Fatal("no message id")
		}
	}
}

func TestSendQuotedReply(t *testing.T) {
	a, fc, sink := connectedAdapter(t, "")
	in := inGroup("3EB0QUESTION", types.JID{User: bobPN.User, Server: types.DefaultUserServer, Device: 2}, text("@bot what time is it?"))
	if !fc.emit(in) || len(sink.got) != 1 {
		t.Fatal("not delivered")
	}
	got := sink.got[0]
	if _, err := a.Send(context.Background(), adapters.Outbound{ChatID: got.ChatID, Text: "noon", ReplyTo: got.MessageID}); err != nil {
		t.Fatal(err)
	}
	m := fc.lastSent(t)
	et := m.msg.GetExtendedTextMessage()
	ci := et.GetContextInfo()
	if m.to != groupJID || et.GetText() != "noon" || ci.GetStanzaID() != "3EB0QUESTION" ||
		ci.GetParticipant() != bobPN.String() || ci.GetQuotedMessage().GetConversation() != "@bot what time is it?" {
		t.Fatalf("reply %v to %v", m.msg, m.to)
	}

	// A message this process never saw (from before a restart) can't be
	// quoted properly: it goes as a plain message.
	if _, err := a.Send(context.Background(), adapters.Outbound{ChatID: got.ChatID, Text: "later", ReplyTo: "3EB0UNKNOWN"}); err != nil {
		t.Fatal(err)
	}
	if m := fc.lastSent(t); m.msg.GetConversation() != "later" || m.msg.ExtendedTextMessage != nil {
		t.Fatalf("unknown reply target sent as %v", m.msg)
	}
}

func TestSendIdempotencyKeyIsTheMessageID(t *testing.T) {
	a, fc, _ := connectedAdapter(t, "")
	out := adapters.Outbound{ChatID: alicePN.String(), Text: "once", IdempotencyKey: "outbox-42"}
	first, err := a.Send(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Send(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if first.MessageID != again.MessageID || !regexp.MustCompile(`^3EB0[0-9A-F]{18}$`).MatchString(first.MessageID) {
		t.Fatalf("ids %q and %q", first.MessageID, again.MessageID)
	}
	if m := fc.lastSent(t); len(m.extra) != 1 || m.extra[0].ID != first.MessageID {
		t.Fatalf("extra %v", m.extra)
	}
	other, _ := a.Send(context.Background(), adapters.Outbound{ChatID: alicePN.String(), Text: "once", IdempotencyKey: "outbox-43"})
	if other.MessageID == first.MessageID {
		t.Fatal("two keys, one id")
	}
}

func TestSendErrors(t *testing.T) {
	a, fc, _ := connectedAdapter(t, "")
	ctx := context.Background()
	if _, err := a.Send(ctx, adapters.Outbound{ChatID: "alice", Text: "hi"}); !errors.Is(err, ErrBadChatID) {
		t.Fatalf("bad chat id: %v", err)
	}
	if _, err := a.Send(ctx, adapters.Outbound{ChatID: "status@broadcast", Text: "hi"}); !errors.Is(err, ErrBadChatID) {
		t.Fatalf("status broadcast: %v", err)
	}
	if _, err := a.Send(ctx, adapters.Outbound{ChatID: alicePN.String(), Text: " \n"}); err == nil {
		t.Fatal("sent an empty message")
	}
	fc.mu.Lock()
	n := len(fc.sent)
	fc.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d messages sent despite errors", n)
	}

	tests := []struct {
		name string
		err  error
		rate bool
	}{
		{"rate overlimit", fmt.Errorf("failed to get device list: %w", whatsmeow.ErrIQRateOverLimit), true},
		{"server 429", fmt.Errorf("%w %d", whatsmeow.ErrServerReturnedError, 429), true},
		{"server 500", fmt.Errorf("%w %d", whatsmeow.ErrServerReturnedError, 500), false},
		{"timeout", whatsmeow.ErrMessageTimedOut, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc.mu.Lock()
			fc.sendErr = tc.err
			fc.mu.Unlock()
			_, err := a.Send(ctx, adapters.Outbound{ChatID: alicePN.String(), Text: "hi"})
			var rl *adapters.RateLimitError
			if !errors.Is(err, tc.err) || errors.As(err, &rl) != tc.rate {
				t.Fatalf("error %v: rate limit %v, want %v", err, errors.As(err, &rl), tc.rate)
			}
			if tc.rate && rl.RetryAfter != 30*time.Second {
				t.Fatalf("retry after %s", rl.RetryAfter)
			}
		})
	}
}

func TestSendBeforeConnect(t *testing.T) {
	a, _ := testAdapter(t, "", newFakeClient(), newFakeClock(true), adapters.Deps{})
	_, err := a.Send(context.Background(), adapters.Outbound{ChatID: alicePN.String(), Text: "hi"})
	if !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), "starting") {
		t.Fatalf("error %v", err)
	}
	if err := a.Typing(context.Background(), alicePN.String()); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("typing: %v", err)
	}
}

func TestTyping(t *testing.T) {
	a, fc, _ := connectedAdapter(t, "")
	if err := a.Typing(context.Background(), groupJID.String()); err != nil {
		t.Fatal(err)
	}
	if err := a.Typing(context.Background(), "nope"); !errors.Is(err, ErrBadChatID) {
		t.Fatalf("bad chat: %v", err)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.chatStates) != 1 || fc.chatStates[0] != groupJID {
		t.Fatalf("composing sent to %v", fc.chatStates)
	}
}

func TestFetch(t *testing.T) {
	a, fc, sink := connectedAdapter(t, "")
	fc.mu.Lock()
	fc.downloads[imageMsg.GetDirectPath()] = []byte("\xff\xd8\xff\xe0 jpeg bytes")
	fc.mu.Unlock()
	if !fc.emit(dm("F1", &waE2E.Message{ImageMessage: imageMsg})) {
		t.Fatal("not delivered")
	}
	ref := sink.got[0].Files[0]
	data, mediaType, err := a.Fetch(context.Background(), ref, 1<<20)
	if err != nil || string(data) != "\xff\xd8\xff\xe0 jpeg bytes" || mediaType != "image/jpeg" {
		t.Fatalf("fetched %q %q %v", data, mediaType, err)
	}
	if _, _, err := a.Fetch(context.Background(), ref, 1000); !errors.Is(err, adapters.ErrTooLarge) {
		t.Fatalf("over the limit by its size: %v", err)
	}
	small := ref
	small.Size = 0
	if _, _, err := a.Fetch(context.Background(), small, 4); !errors.Is(err, adapters.ErrTooLarge) {
		t.Fatalf("over the limit once read: %v", err)
	}
	if _, _, err := a.Fetch(context.Background(), adapters.FileRef{ID: "AgADBAADr6cxG"}, 0); err == nil {
		t.Fatal("fetched another adapter's file id")
	}
}
