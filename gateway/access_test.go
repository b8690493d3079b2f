package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/sessions/storetest"
)

var codeInReply = regexp.MustCompile(`pairing code is ([A-Z2-9]{8})`)

func dm(user, id, text string) adapters.Inbound {
	return adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "dm-" + user, UserID: user, DisplayName: "U" + user,
		MessageID: id, Text: text, Time: time.Now()}
}

func group(user, id, text string, mentioned bool) adapters.Inbound {
	return adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "g1", UserID: user, DisplayName: "U" + user,
		Group: true, Mentioned: mentioned, MessageID: id, Text: text, Time: time.Now()}
}

func TestAccessPolicies(t *testing.T) {
	tests := []struct {
		name   string
		access gateway.Access
		in     adapters.Inbound
		want   string // the reply, "" for none; "pairing" for a code
		model  bool   // whether the message reached the model
	}{
		{"dm open", gateway.Access{DM: gateway.DMOpen}, dm("1", "a", "hi"), "echo: hi", true},
		{"dm allowlist, listed", gateway.Access{DM: gateway.DMAllowlist, Allow: map[string]bool{"1": true}}, dm("1", "a", "hi"), "echo: hi", true},
		{"dm allowlist, stranger", gateway.Access{DM: gateway.DMAllowlist, Allow: map[string]bool{"1": true}}, dm("2", "a", "hi"), "", false},
		{"dm pairing, listed", gateway.Access{DM: gateway.DMPairing, Allow: map[string]bool{"1": true}}, dm("1", "a", "hi"), "echo: hi", true},
		{"dm pairing, stranger", gateway.Access{DM: gateway.DMPairing}, dm("2", "a", "hi"), "pairing", false},
		{"dm pairing, stranger's command", gateway.Access{DM: gateway.DMPairing}, dm("2", "a", "/reset"), "pairing", false},
		{"group mention, mentioned", gateway.Access{DM: gateway.DMAllowlist, Group: gateway.GroupMention, Groups: gateway.GroupsOpen}, group("9", "a", "hi bot", true), "echo: U9: hi bot", true},
		{"group mention, not mentioned", gateway.Access{DM: gateway.DMAllowlist, Group: gateway.GroupMention, Groups: gateway.GroupsOpen}, group("9", "a", "chatter", false), "", false},
		{"group always", gateway.Access{DM: gateway.DMAllowlist, Group: gateway.GroupAlways, Groups: gateway.GroupsOpen}, group("9", "a", "chatter", false), "echo: U9: chatter", true},
		{"group never", gateway.Access{DM: gateway.DMOpen, Group: gateway.GroupNever}, group("9", "a", "hi bot", true), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ran := make(chan string, 4)
			r := newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
				ran <- in.Messages[0].Text
				return "echo: " + in.Messages[0].Attributed(), nil
			}, func(o *gateway.Options) {
				o.Access = map[adapters.ID]gateway.Access{"tg": tc.access}
			})
			r.deliver(tc.in)
			if tc.want != "" {
				got := r.sent(1)[0]
				if tc.want == "pairing" {
					if !codeInReply.MatchString(got) || !strings.Contains(got, "parley pairing approve") {
						t.Fatalf("reply %q has no pairing code", got)
					}
				} else if got != tc.want {
					t.Fatalf("reply %q, want %q", got, tc.want)
				}
			}
			waitUnfinished(t, r.store, 0)
			select {
			case text := <-ran:
				if !tc.model {
					t.Fatalf("%q reached the model", text)
				}
			default:
				if tc.model {
					t.Fatal("the message never reached the model")
				}
			}
			if tc.want == "" {
				if got := r.rec.Sent(); len(got) != 0 {
					t.Fatalf("replied %v", got)
				}
			}
			wantDenied := int64(0)
			if !tc.model && tc.want != "" || !tc.model && !tc.in.Group || tc.access.Group == gateway.GroupNever {
				wantDenied = 1
			}
			if got := r.gw.Denied(); got != wantDenied {
				t.Fatalf("denied %d, want %d", got, wantDenied)
			}
		})
	}
}

// A group message the bot wasn't addressed in is kept as context: the next
// turn's history holds it, attributed to its sender.
func TestGroupChatterIsContext(t *testing.T) {
	r := newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
		return "ok", nil
	}, func(o *gateway.Options) {
		o.Access = map[adapters.ID]gateway.Access{"tg": {DM: gateway.DMAllowlist, Group: gateway.GroupMention, Groups: gateway.GroupsOpen}}
	})
	r.deliver(group("7", "g-1", "the train is at 6", false))
	r.deliver(group("8", "g-2", "@bot when is the train?", true))
	r.sent(1)
	waitUnfinished(t, r.store, 0)
	s, err := r.sess.Active(r.ctx, sessions.GroupKey("telegram", "g1", "default"))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.sess.Messages(r.ctx, s.ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var history []string
	for _, m := range msgs {
		history = append(history, string(m.Role)+": "+m.Content)
	}
	// The turn itself is faked here, so only the kept context is stored.
	if len(history) < 1 || history[0] != "user: U7: the train is at 6" {
		t.Fatalf("history %q", history)
	}
}

// The whole pairing flow: a code, the same code on a second message, the
// operator's approval, a line to the user, then answers.
func TestPairingFlow(t *testing.T) {
	r := newRig(t, dbtest.SQLite(t), echoRun, func(o *gateway.Options) {
		o.Access = map[adapters.ID]gateway.Access{"tg": {DM: gateway.DMPairing, Group: gateway.GroupMention}}
	})
	r.deliver(dm("5", "p-1", "hello"))
	first := codeInReply.FindStringSubmatch(r.sent(1)[0])
	r.deliver(dm("5", "p-2", "hello again"))
	second := codeInReply.FindStringSubmatch(r.sent(2)[1])
	if first == nil || second == nil || first[1] != second[1] {
		t.Fatalf("codes %v then %v; a waiting sender keeps one code", first, second)
	}
	waiting, err := r.store.Pairings(r.ctx)
	if err != nil || len(waiting) != 1 || waiting[0].UserID != "5" || waiting[0].ChatID != "dm-5" {
		t.Fatalf("waiting: %+v %v", waiting, err)
	}
	p, err := r.store.ApprovePairing(r.ctx, " "+strings.ToLower(first[1][:4])+" "+first[1][4:])
	if err != nil || p.UserID != "5" {
		t.Fatalf("approve: %+v %v", p, err)
	}
	if got := r.sent(3)[2]; !strings.Contains(got, "approved") {
		t.Fatalf("no approval line: %q", got)
	}
	if _, err := r.store.ApprovePairing(r.ctx, first[1]); !errors.Is(err, gateway.ErrPairingNotFound) {
		t.Fatalf("second approval: %v", err)
	}
	r.deliver(dm("5", "p-3", "now?"))
	if got := r.sent(4)[3]; got != "echo: now?" {
		t.Fatalf("after approval: %q", got)
	}
}

func TestPairingLimitsAndExpiry(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	s := gateway.NewStore(dbtest.SQLite(t), clock.Now)
	codes := map[string]bool{}
	for i := range gateway.MaxPendingPairings {
		code, err := s.RequestPairing(ctx, dm(fmt.Sprint(i), "x", "hi"))
		if err != nil || len(code) != 8 {
			t.Fatalf("request %d: %q %v", i, code, err)
		}
		codes[code] = true
	}
	if len(codes) != gateway.MaxPendingPairings {
		t.Fatalf("codes repeat: %v", codes)
	}
	if _, err := s.RequestPairing(ctx, dm("99", "x", "hi")); !errors.Is(err, gateway.ErrTooManyPairings) {
		t.Fatalf("a fourth pending request: %v", err)
	}
	// Another adapter has its own limit.
	other := dm("99", "x", "hi")
	other.Adapter = "tg-two"
	if _, err := s.RequestPairing(ctx, other); err != nil {
		t.Fatalf("another adapter's first request: %v", err)
	}
	// Just before the hour, a code still works; at the hour, it doesn't,
	// and the slot frees up.
	var some string
	for c := range codes {
		some = c
		break
	}
	clock.Advance(gateway.PairingTTL - time.Millisecond)
	if _, err := s.RequestPairing(ctx, dm("99", "x", "hi")); !errors.Is(err, gateway.ErrTooManyPairings) {
		t.Fatalf("still full before the hour: %v", err)
	}
	clock.Advance(time.Millisecond)
	if _, err := s.ApprovePairing(ctx, some); !errors.Is(err, gateway.ErrPairingExpired) {
		t.Fatalf("approving an expired code: %v", err)
	}
	if _, err := s.RequestPairing(ctx, dm("99", "x", "hi")); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if ok, _ := s.Allowed(ctx, "tg", "0"); ok {
		t.Fatal("an expired request let its sender in")
	}
}

// In a group where the bot answers everything, "/reset@otherbot" is for
// another bot: no reset.
func TestCommandForAnotherBot(t *testing.T) {
	r := newRig(t, dbtest.SQLite(t), echoRun, func(o *gateway.Options) {
		o.Access = map[adapters.ID]gateway.Access{"tg": {DM: gateway.DMOpen, Group: gateway.GroupAlways, Groups: gateway.GroupsOpen}}
	})
	r.deliver(group("9", "a", "/reset@otherbot", false))
	r.deliver(group("9", "b", "/reset@parleybot", true))
	got := r.sent(2)
	if got[0] == "Started a new conversation." || got[1] != "Started a new conversation." {
		t.Fatalf("replies %q", got)
	}
}

// A new pairing request is logged at info with its code, so the operator
// can approve it from the log; a sender writing again gets the same code
// and no second line.
func TestPairingRequestIsLogged(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		var buf bytes.Buffer
		w := &lockedWriter{w: &buf}
		r := newRig(t, open(t), echoRun, func(o *gateway.Options) {
			o.Access = map[adapters.ID]gateway.Access{"tg": {DM: gateway.DMPairing, Group: gateway.GroupMention}}
			o.Log = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
		})
		r.deliver(dm("5", "p-1", "hello"))
		code := codeInReply.FindStringSubmatch(r.sent(1)[0])
		r.deliver(dm("5", "p-2", "hello again"))
		r.sent(2)
		waitUnfinished(t, r.store, 0)
		if code == nil {
			t.Fatal("no code in the reply")
		}
		w.mu.Lock()
		logged := buf.String()
		w.mu.Unlock()
		var lines []string
		for _, l := range strings.Split(logged, "\n") {
			if strings.Contains(l, "pairing requested") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "code="+code[1]) ||
			!strings.Contains(lines[0], "adapter=tg") || !strings.Contains(lines[0], "user_id=5") {
			t.Fatalf("pairing log lines %q; want one at info with code=%s", lines, code[1])
		}
	})
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
