package whatsapp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// linkAdapter is an adapter on a fresh SQLite database whose clients are fc.
func linkAdapter(t *testing.T, snippet string, fc *fakeClient) *Adapter {
	t.Helper()
	db := dbtest.RawSQLite(t)
	a, _ := testAdapter(t, snippet, fc, newFakeClock(true), adapters.Deps{DB: db.Writer(), Dialect: "sqlite"})
	return a
}

// runLink runs Link in the background and returns its result channel.
func runLink(ctx context.Context, a adapters.Adapter, out *syncBuffer, phone string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Link(ctx, a, out, phone) }()
	return done
}

// phone plays the phone's part once Link connected: it sends the items
// and, before the last, the new device's first connection.
func phone(t *testing.T, fc *fakeClient, items ...whatsmeow.QRChannelItem) {
	t.Helper()
	fc.waitFor(t, "link to connect", func(f *fakeClient) bool { return f.connects == 1 && f.qr != nil })
	fc.mu.Lock()
	qr := fc.qr
	fc.mu.Unlock()
	for i, it := range items {
		if i == len(items)-1 && it.Event == whatsmeow.QRChannelSuccess.Event {
			fc.emit(&events.Connected{})
		}
		qr <- it
	}
}

func linkResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Link did not return")
		return nil
	}
}

func code(s string) whatsmeow.QRChannelItem {
	return whatsmeow.QRChannelItem{Event: whatsmeow.QRChannelEventCode, Code: s, Timeout: 20 * time.Second}
}

func TestLinkByQR(t *testing.T) {
	fc := newFakeClient()
	a := linkAdapter(t, "", fc)
	out := &syncBuffer{}
	done := runLink(context.Background(), a, out, "")
	phone(t, fc, code("2@abc,def,ghi,jkl"), code("2@mno,pqr,stu,vwx"), whatsmeow.QRChannelSuccess)
	if err := linkResult(t, done); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"WhatsApp → Settings → Linked devices → Link a device",
		"▀", "█", "(valid for 20s)",
		"That code expired; here is a new one",
		"Linked: adapter wa is WhatsApp +4915100000001",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.pairedPhone != "" || fc.connected || len(fc.handlers) != 0 {
		t.Fatalf("after linking: paired %q, connected %v, %d handlers", fc.pairedPhone, fc.connected, len(fc.handlers))
	}
}

func TestLinkByPhoneNumber(t *testing.T) {
	fc := newFakeClient()
	fc.pairCode = "ABCD-EFGH"
	a := linkAdapter(t, "", fc)
	out := &syncBuffer{}
	done := runLink(context.Background(), a, out, "+49 151 00000001")
	phone(t, fc, code("2@a"), code("2@b"), whatsmeow.QRChannelSuccess)
	if err := linkResult(t, done); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"Pairing code for +4915100000001", "ABCD-EFGH", "Link with phone number instead", "Linked: adapter wa"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "█") {
		t.Error("showed a QR code when pairing by number")
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.pairedPhone != "4915100000001" {
		t.Fatalf("paired %q", fc.pairedPhone)
	}
}

func TestLinkTellsWhenTheConfigNamesAnotherNumber(t *testing.T) {
	fc := newFakeClient()
	a := linkAdapter(t, `device: "4915100000009"`, fc)
	out := &syncBuffer{}
	done := runLink(context.Background(), a, out, "")
	phone(t, fc, code("2@a"), whatsmeow.QRChannelSuccess)
	if err := linkResult(t, done); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `set device: "4915100000001"`) {
		t.Fatalf("no note:\n%s", out)
	}
}

func TestLinkFailures(t *testing.T) {
	tests := []struct {
		name  string
		items []whatsmeow.QRChannelItem
		want  string
	}{
		{"codes ran out", []whatsmeow.QRChannelItem{code("2@a"), whatsmeow.QRChannelTimeout}, "not used in time"},
		{"pairing error", []whatsmeow.QRChannelItem{code("2@a"), {Event: whatsmeow.QRChannelEventError, Error: errors.New("bad signature")}}, "bad signature"},
		{"outdated", []whatsmeow.QRChannelItem{whatsmeow.QRChannelClientOutdated}, "update parley"},
		{"passkey", []whatsmeow.QRChannelItem{{Event: whatsmeow.QRChannelEventPasskeyRequest}}, "passkey"},
		{"unexpected", []whatsmeow.QRChannelItem{whatsmeow.QRChannelErrUnexpectedEvent}, "err-unexpected-state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeClient()
			a := linkAdapter(t, "", fc)
			done := runLink(context.Background(), a, &syncBuffer{}, "")
			phone(t, fc, tc.items...)
			err := linkResult(t, done)
			if !errors.Is(err, ErrLinkFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want ErrLinkFailed mentioning %q", err, tc.want)
			}
			if fc.IsConnected() {
				t.Fatal("left connected")
			}
		})
	}
}

func TestLinkCancelled(t *testing.T) {
	fc := newFakeClient()
	a := linkAdapter(t, "", fc)
	ctx, cancel := context.WithCancel(context.Background())
	done := runLink(ctx, a, &syncBuffer{}, "")
	phone(t, fc, code("2@a"))
	cancel()
	if err := linkResult(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
}

func TestLinkRefusals(t *testing.T) {
	ctx := context.Background()

	fc := newFakeClient()
	a := linkAdapter(t, "", fc)
	if err := Link(ctx, a, &syncBuffer{}, "0151 2345678"); err == nil || !strings.Contains(err.Error(), "international form") {
		t.Fatalf("local number: %v", err)
	}
	b := linkAdapter(t, `device: "4915100000009"`, fc)
	if err := Link(ctx, b, &syncBuffer{}, "+4915100000001"); err == nil || !strings.Contains(err.Error(), "not this adapter's device") {
		t.Fatalf("another number: %v", err)
	}
	if err := Link(ctx, adapterstest.New(), &syncBuffer{}, ""); err == nil || !strings.Contains(err.Error(), "not a WhatsApp adapter") {
		t.Fatalf("another adapter: %v", err)
	}
	noDB, _ := testAdapter(t, "", fc, newFakeClock(true), adapters.Deps{})
	if err := Link(ctx, noDB, &syncBuffer{}, ""); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("no database: %v", err)
	}

	st, err := a.openStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	putDevice(t, ctx, st, botPN.User, 4)
	err = Link(ctx, a, &syncBuffer{}, "")
	if !errors.Is(err, ErrAlreadyLinked) || !strings.Contains(err.Error(), "4915100000001@s.whatsapp.net") ||
		!strings.Contains(err.Error(), "device: <number>") {
		t.Fatalf("already linked: %v", err)
	}
	if fc.connects != 0 {
		t.Fatalf("connected %d times for refused links", fc.connects)
	}
}
