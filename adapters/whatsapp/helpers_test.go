package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	waLog "go.mau.fi/whatsmeow/util/log"
	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/internal/syncbuf"
)

func yamlDecoder(snippet string) adapters.Decoder {
	return func(v any) error {
		dec := yaml.NewDecoder(strings.NewReader(snippet))
		dec.KnownFields(true)
		return dec.Decode(v)
	}
}

// Test identities: the linked account (bot), a contact, a group.
var (
	botPN    = types.NewJID("4915100000001", types.DefaultUserServer)
	botLID   = types.NewJID("100000000000001", types.HiddenUserServer)
	alicePN  = types.NewJID("4915100000002", types.DefaultUserServer)
	aliceLID = types.NewJID("200000000000002", types.HiddenUserServer)
	bobPN    = types.NewJID("4915100000003", types.DefaultUserServer)
	groupJID = types.NewJID("120363000000000001", types.GroupServer)
)

// syncBuffer is a log destination tests can read while the adapter writes.
type syncBuffer = syncbuf.Buffer

// sentMessage is one SendMessage call.
type sentMessage struct {
	to    types.JID
	msg   *waE2E.Message
	extra []whatsmeow.SendRequestExtra
}

// readReceipt is one MarkRead call.
type readReceipt struct {
	ids          []types.MessageID
	chat, sender types.JID
}

// fakeClient stands in for whatsmeow's client: it records what the
// adapter asks of it, and a test dispatches events to the adapter's
// handlers as whatsmeow would (emit).
type fakeClient struct {
	mu          sync.Mutex
	handlers    map[uint32]whatsmeow.EventHandlerWithSuccessStatus
	nextHandler uint32
	connects    int
	connectErrs []error // returned by the next Connects, in order
	connected   bool
	loggedIn    bool // once connected
	disconnects int
	pn, lid     types.JID
	lids        map[types.JID]types.JID // LID -> phone-number JID
	sent        []sentMessage
	sendErr     error
	reads       []readReceipt
	readErr     error
	chatStates  []types.JID
	presences   []types.Presence
	presenceErr error
	downloads   map[string][]byte // by direct path
	uploads     []upload
	qr          chan whatsmeow.QRChannelItem
	pairedPhone string
	pairCode    string
	changed     chan struct{} // closed and replaced on every call
}

func newFakeClient() *fakeClient {
	return &fakeClient{
		handlers: map[uint32]whatsmeow.EventHandlerWithSuccessStatus{},
		pn:       botPN, lid: botLID,
		lids:      map[types.JID]types.JID{},
		downloads: map[string][]byte{},
		changed:   make(chan struct{}),
	}
}

var _ client = (*fakeClient)(nil)

// touch wakes waiters; call with f.mu held.
func (f *fakeClient) touch() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitFor waits until cond (called with f.mu held) holds.
func (f *fakeClient) waitFor(t *testing.T, what string, cond func(f *fakeClient) bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		f.mu.Lock()
		ok, ch := cond(f), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// emit dispatches evt to the handlers, as whatsmeow does; false when a
// handler failed it.
func (f *fakeClient) emit(evt any) bool {
	f.mu.Lock()
	hs := make([]whatsmeow.EventHandlerWithSuccessStatus, 0, len(f.handlers))
	for _, h := range f.handlers {
		hs = append(hs, h)
	}
	f.mu.Unlock()
	for _, h := range hs {
		if !h(evt) {
			return false
		}
	}
	return true
}

func (f *fakeClient) Connect() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	f.connects++
	if len(f.connectErrs) > 0 {
		err := f.connectErrs[0]
		f.connectErrs = f.connectErrs[1:]
		if err != nil {
			return err
		}
	}
	f.connected = true
	return nil
}

func (f *fakeClient) Disconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	f.connected = false
	f.disconnects++
}

func (f *fakeClient) IsConnected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connected
}

func (f *fakeClient) IsLoggedIn() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connected && f.loggedIn
}

func (f *fakeClient) setConnected(v bool) {
	f.mu.Lock()
	f.connected = v
	f.mu.Unlock()
}

func (f *fakeClient) AddEventHandlerWithSuccessStatus(h whatsmeow.EventHandlerWithSuccessStatus) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	f.nextHandler++
	f.handlers[f.nextHandler] = h
	return f.nextHandler
}

func (f *fakeClient) RemoveEventHandler(id uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	_, ok := f.handlers[id]
	delete(f.handlers, id)
	return ok
}

func (f *fakeClient) SendMessage(ctx context.Context, to types.JID, msg *waE2E.Message, extra ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	if f.sendErr != nil {
		return whatsmeow.SendResponse{}, f.sendErr
	}
	f.sent = append(f.sent, sentMessage{to: to, msg: msg, extra: extra})
	id := types.MessageID("3EB0FAKE" + string(rune('A'+len(f.sent)-1)))
	if len(extra) > 0 && extra[0].ID != "" {
		id = extra[0].ID
	}
	return whatsmeow.SendResponse{ID: id, Timestamp: time.Now()}, nil
}

// upload is one file given to Upload.
type upload struct {
	data []byte
	kind whatsmeow.MediaType
}

// Upload keeps the plaintext and answers with a direct path naming it,
// as WhatsApp's media servers do.
func (f *fakeClient) Upload(ctx context.Context, plaintext []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	f.uploads = append(f.uploads, upload{data: append([]byte(nil), plaintext...), kind: kind})
	path := fmt.Sprintf("/v/t62/upload-%d", len(f.uploads))
	return whatsmeow.UploadResponse{URL: "https://mmg.whatsapp.net" + path, DirectPath: path, MediaKey: []byte("key"),
		FileEncSHA256: []byte("enc"), FileSHA256: []byte("sha"), FileLength: uint64(len(plaintext))}, nil
}

func (f *fakeClient) MarkRead(ctx context.Context, ids []types.MessageID, at time.Time, chat, sender types.JID, _ ...types.ReceiptType) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	f.reads = append(f.reads, readReceipt{ids: ids, chat: chat, sender: sender})
	return f.readErr
}

func (f *fakeClient) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reads)
}

func (f *fakeClient) SendChatPresence(ctx context.Context, jid types.JID, state types.ChatPresence, media types.ChatPresenceMedia) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	if state != types.ChatPresenceComposing {
		return errors.New("fake: unexpected chat presence " + string(state))
	}
	f.chatStates = append(f.chatStates, jid)
	return nil
}

func (f *fakeClient) SendPresence(ctx context.Context, state types.Presence) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	if f.presenceErr != nil {
		err := f.presenceErr
		f.presenceErr = nil
		return err
	}
	f.presences = append(f.presences, state)
	return nil
}

func (f *fakeClient) Download(ctx context.Context, m whatsmeow.DownloadableMessage) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, ok := f.downloads[m.GetDirectPath()]
	if !ok {
		return nil, whatsmeow.ErrNoURLPresent
	}
	return data, nil
}

func (f *fakeClient) GetQRChannel(ctx context.Context) (<-chan whatsmeow.QRChannelItem, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	f.qr = make(chan whatsmeow.QRChannelItem, 8)
	return f.qr, nil
}

func (f *fakeClient) PairPhone(ctx context.Context, phone string, _ bool, _ whatsmeow.PairClientType, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.touch()
	f.pairedPhone = phone
	return f.pairCode, nil
}

func (f *fakeClient) ownJIDs() (types.JID, types.JID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pn, f.lid
}

func (f *fakeClient) pnForLID(ctx context.Context, lid types.JID) types.JID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lids[lid]
}

// fakeClock stands in for time.After: each wait is recorded and ends
// when the test fires it (or at once, when auto is set).
type fakeClock struct {
	mu      sync.Mutex
	auto    bool
	waits   []time.Duration
	pending []chan time.Time
	changed chan struct{}
}

func newFakeClock(auto bool) *fakeClock {
	return &fakeClock{auto: auto, changed: make(chan struct{})}
}

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waits = append(c.waits, d)
	if c.auto {
		ch <- time.Now()
	} else {
		c.pending = append(c.pending, ch)
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// waitWaits waits until n waits were asked for and returns them.
func (c *fakeClock) waitWaits(t *testing.T, n int) []time.Duration {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		w, ch := append([]time.Duration(nil), c.waits...), c.changed
		c.mu.Unlock()
		if len(w) >= n {
			return w
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %d waits; have %v", n, w)
		}
	}
}

// fire ends every pending wait.
func (c *fakeClock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.pending {
		ch <- time.Now()
	}
	c.pending = nil
}

// testAdapter builds an adapter from a config snippet, with a fake clock
// and the given client for every device.
func testAdapter(t *testing.T, snippet string, fc *fakeClient, clock *fakeClock, deps adapters.Deps) (*Adapter, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	if deps.Log == nil {
		deps.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	a, err := New("wa", yamlDecoder(snippet), deps)
	if err != nil {
		t.Fatal(err)
	}
	a.after = clock.after
	a.deliverBackoff = func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	a.newClient = func(*store.Device, waLog.Logger) client { return fc }
	return a, logs
}

// waitHealth waits until the adapter's health satisfies cond.
func waitHealth(t *testing.T, a *Adapter, what string, cond func(ok bool, detail string) bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := a.healthChanged()
		ok, detail := a.Health()
		if cond(ok, detail) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for health %s; have %v %q", what, ok, detail)
		}
	}
}

// recordingSink stores what it is given, failing the first fails calls.
type recordingSink struct {
	mu    sync.Mutex
	fails int
	err   error
	calls int
	got   []adapters.Inbound
	// before, if set, runs at the start of every Deliver.
	before func()
}

func (s *recordingSink) Deliver(ctx context.Context, in adapters.Inbound) error {
	if s.before != nil {
		s.before()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fails != 0 {
		if s.fails > 0 {
			s.fails--
		}
		return s.err
	}
	s.got = append(s.got, in)
	return nil
}
