package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mauDBUtil "go.mau.fi/util/dbutil"
	"go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	waLog "go.mau.fi/whatsmeow/util/log"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

func storeAdapter(t *testing.T, db *dbutil.DB, snippet string) (*Adapter, *syncBuffer) {
	t.Helper()
	return testAdapter(t, snippet, newFakeClient(), newFakeClock(true), adapters.Deps{DB: db.Writer(), Dialect: string(db.Dialect)})
}

// putDevice stores a linked device for the phone number user, as
// whatsmeow does after pairing.
func putDevice(t *testing.T, ctx context.Context, st interface {
	NewDevice() *store.Device
	PutDevice(context.Context, *store.Device) error
}, user string, device uint16) *store.Device {
	t.Helper()
	dev := st.NewDevice()
	jid := types.JID{User: user, Server: types.DefaultUserServer, Device: device}
	dev.ID = &jid
	dev.Account = &waAdv.ADVSignedDeviceIdentity{
		Details: []byte("details"), AccountSignature: make([]byte, 64), AccountSignatureKey: make([]byte, 32), DeviceSignature: make([]byte, 64),
	}
	if err := st.PutDevice(ctx, dev); err != nil {
		t.Fatalf("put device: %v", err)
	}
	return dev
}

// The device store opens in parley's own database, beside parley's
// tables, on the handle the daemon gives adapters (SQLite's single writer
// connection, or the Postgres pool).
func TestDeviceStore(t *testing.T) {
	engines := []struct {
		name string
		open dbtest.Opener
	}{
		{"sqlite", dbtest.RawSQLite},
		{"sqlite beside parley's tables", dbtest.SQLite},
		{"postgres", dbtest.RawPostgres},
		{"postgres beside parley's tables", dbtest.Postgres},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			db := e.open(t)
			a, _ := storeAdapter(t, db, "")
			st, err := a.openStore(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.openStore(ctx); err != nil {
				t.Fatalf("second upgrade: %v", err)
			}
			first, err := st.GetFirstDevice(ctx)
			if err != nil || first == nil || first.ID != nil {
				t.Fatalf("GetFirstDevice on an empty store: %v, %v", first, err)
			}
			if dev, err := a.device(ctx, st); err != nil || dev != nil {
				t.Fatalf("device before linking: %v, %v", dev, err)
			}

			dev := putDevice(t, ctx, st, "4915100000001", 5)
			// What whatsmeow does with the store once connected; on
			// SQLite's one writer connection none of it may deadlock.
			if _, err := dev.PreKeys.GetOrGenPreKeys(ctx, 5); err != nil {
				t.Fatalf("prekeys: %v", err)
			}
			if err := dev.Identities.PutIdentity(ctx, "4915100000002.0:0", [32]byte{1}); err != nil {
				t.Fatalf("identity: %v", err)
			}
			if err := dev.Sessions.PutSession(ctx, "4915100000002.0:0", []byte("session")); err != nil {
				t.Fatalf("session: %v", err)
			}
			if err := dev.LIDs.PutLIDMapping(ctx, aliceLID, alicePN); err != nil {
				t.Fatalf("lid mapping: %v", err)
			}
			got, err := a.device(ctx, st)
			if err != nil || got == nil || got.ID.String() != "4915100000001:5@s.whatsapp.net" {
				t.Fatalf("device after linking: %v, %v", got, err)
			}
			if got.IdentityKey.Priv == nil || *got.IdentityKey.Priv != *dev.IdentityKey.Priv {
				t.Fatal("the stored device lost its keys")
			}
			rc := newRealClient(got, nil)
			if pn := rc.pnForLID(ctx, aliceLID); pn != alicePN {
				t.Fatalf("pnForLID from the store: %v", pn)
			}
			if pn, _ := rc.ownJIDs(); pn.String() != "4915100000001@s.whatsapp.net" {
				t.Fatalf("own JID %v", pn)
			}

			var n int
			if err := db.Writer().QueryRowContext(ctx, "SELECT count(*) FROM whatsmeow_device").Scan(&n); err != nil || n != 1 {
				t.Fatalf("whatsmeow_device rows %d, %v", n, err)
			}
			if strings.Contains(e.name, "beside") {
				if err := db.Writer().QueryRowContext(ctx, "SELECT count(*) FROM sessions").Scan(&n); err != nil {
					t.Fatalf("parley's own tables after whatsmeow's upgrade: %v", err)
				}
			}
			if err := got.Delete(ctx); err != nil {
				t.Fatalf("delete (what a logout does): %v", err)
			}
			if dev, err := a.device(ctx, st); err != nil || dev != nil {
				t.Fatalf("device after logout: %v, %v", dev, err)
			}
		})
	}
}

func TestDeviceSelection(t *testing.T) {
	ctx := context.Background()
	db := dbtest.RawSQLite(t)
	a, logs := storeAdapter(t, db, "")
	st, err := a.openStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	putDevice(t, ctx, st, "4915100000009", 2)
	putDevice(t, ctx, st, "4915100000003", 7)

	dev, err := a.device(ctx, st)
	if err != nil || dev.ID.User != "4915100000003" {
		t.Fatalf("default device %v, %v; want the first by JID", dev, err)
	}
	if _, err := a.device(ctx, st); err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(logs.String(), "several WhatsApp devices stored"); c != 1 {
		t.Fatalf("warned %d times:\n%s", c, logs)
	}

	b, _ := storeAdapter(t, db, `device: "+49 151 00000009"`)
	if dev, err := b.device(ctx, st); err != nil || dev.ID.String() != "4915100000009:2@s.whatsapp.net" {
		t.Fatalf("configured device %v, %v", dev, err)
	}
	c, _ := storeAdapter(t, db, `device: "4915100000777"`)
	if dev, err := c.device(ctx, st); err != nil || dev != nil {
		t.Fatalf("a number not linked yet: %v, %v", dev, err)
	}
}

func TestStartWithoutDatabase(t *testing.T) {
	a, _ := testAdapter(t, "", newFakeClient(), newFakeClock(true), adapters.Deps{})
	if err := a.Start(context.Background(), &recordingSink{}); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("Start without a database: %v", err)
	}
}

// startAdapter runs Start in the background; stop ends it and returns
// its error.
func startAdapter(t *testing.T, a *Adapter, sink adapters.Sink) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx, sink) }()
	t.Cleanup(cancel)
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Start did not return")
			return nil
		}
	}
}

func TestStartNotLinked(t *testing.T) {
	db := dbtest.RawSQLite(t)
	clock := newFakeClock(false)
	fc := newFakeClient()
	a, logs := testAdapter(t, "", fc, clock, adapters.Deps{DB: db.Writer(), Dialect: "sqlite"})
	stop := startAdapter(t, a, &recordingSink{})
	waitHealth(t, a, "not linked", func(ok bool, d string) bool {
		return !ok && d == "not linked: run `parley whatsapp link --adapter wa`"
	})
	if !strings.Contains(logs.String(), "whatsapp not linked: run parley whatsapp link") ||
		!strings.Contains(logs.String(), "parley whatsapp link --adapter wa") {
		t.Fatalf("no clear log line:\n%s", logs)
	}
	// It keeps looking, quietly.
	clock.waitWaits(t, 1)
	clock.fire()
	clock.waitWaits(t, 2)
	if c := strings.Count(logs.String(), "whatsapp not linked"); c != 1 {
		t.Fatalf("logged %d times", c)
	}
	if err := stop(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if ok, d := a.Health(); ok || d != "stopped" {
		t.Fatalf("health after stop %v %q", ok, d)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.connects != 0 {
		t.Fatal("connected without a device")
	}
}

// Linked → connected → logged out → linked again, as /readyz shows it,
// on a real device store.
func TestStartFollowsTheLink(t *testing.T) {
	ctx := context.Background()
	db := dbtest.RawSQLite(t)
	clock := newFakeClock(false)
	fc := newFakeClient()
	a, logs := testAdapter(t, "", fc, clock, adapters.Deps{DB: db.Writer(), Dialect: "sqlite"})
	var devices []string
	a.newClient = func(dev *store.Device, _ waLog.Logger) client {
		devices = append(devices, dev.ID.String())
		return fc
	}
	st, err := a.openStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	putDevice(t, ctx, st, botPN.User, 7)

	stop := startAdapter(t, a, &recordingSink{})
	fc.waitFor(t, "connect", func(f *fakeClient) bool { return f.connects == 1 && len(f.handlers) == 1 })
	waitHealth(t, a, "connecting", func(ok bool, d string) bool { return !ok && d == "connecting" })
	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected", func(ok bool, d string) bool { return ok && d == "connected" })

	// The phone unlinks parley. whatsmeow deletes the device, perhaps only
	// after the event: Start must not connect the dead device again.
	fc.emit(&events.LoggedOut{Reason: events.ConnectFailureLoggedOut})
	waitHealth(t, a, "logged out", func(ok bool, d string) bool {
		return !ok && d == "logged out: link again with `parley whatsapp link --adapter wa`"
	})
	clock.waitWaits(t, 1)
	clock.fire()
	clock.waitWaits(t, 2)
	old, err := st.GetDevice(ctx, types.JID{User: botPN.User, Server: types.DefaultUserServer, Device: 7})
	if err != nil || old == nil {
		t.Fatalf("device %v, %v", old, err)
	}
	if err := old.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, d := a.Health(); ok || !strings.HasPrefix(d, "logged out") {
		t.Fatalf("health %v %q", ok, d)
	}

	// Linked again (by `parley whatsapp link` in another process).
	putDevice(t, ctx, st, botPN.User, 9)
	clock.fire()
	fc.waitFor(t, "a new connection", func(f *fakeClient) bool { return f.connects == 2 && len(f.handlers) == 1 })
	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected again", func(ok bool, d string) bool { return ok })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := "[4915100000001:7@s.whatsapp.net 4915100000001:9@s.whatsapp.net]"
	if got := strings.Join([]string{"[" + strings.Join(devices, " ") + "]"}, ""); got != want {
		t.Fatalf("clients for %s, want %s", got, want)
	}
	if c := strings.Count(logs.String(), "whatsapp logged out"); c != 1 {
		t.Fatalf("logout logged %d times:\n%s", c, logs)
	}
}

// whatsmeow decrypts a message and buffers its plaintext in one
// transaction; on SQLite that transaction holds the only writer
// connection, so every query inside must go through it. mautrix's
// deadlock detection panics on one that doesn't.
func TestDecryptionTransactionOnTheSingleWriter(t *testing.T) {
	saved := mauDBUtil.ForceDeadlockDetection
	mauDBUtil.ForceDeadlockDetection = true
	t.Cleanup(func() { mauDBUtil.ForceDeadlockDetection = saved })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := dbtest.RawSQLite(t)
	a, _ := storeAdapter(t, db, "")
	st, err := a.openStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dev := putDevice(t, ctx, st, botPN.User, 3)
	hash := [32]byte{9}
	err = dev.EventBuffer.DoDecryptionTxn(ctx, func(ctx context.Context) error {
		if _, err := dev.Sessions.GetSession(ctx, "4915100000002.0:0"); err != nil {
			return err
		}
		if err := dev.Sessions.PutSession(ctx, "4915100000002.0:0", []byte("ratchet")); err != nil {
			return err
		}
		if _, err := dev.Identities.IsTrustedIdentity(ctx, "4915100000002.0:0", [32]byte{1}); err != nil {
			return err
		}
		return dev.EventBuffer.PutBufferedEvent(ctx, hash, []byte("plaintext"), time.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	buf, err := dev.EventBuffer.GetBufferedEvent(ctx, hash)
	if err != nil || buf == nil || string(buf.Plaintext) != "plaintext" {
		t.Fatalf("buffered event %+v, %v", buf, err)
	}
	// Meanwhile parley's own writes still get the connection.
	if _, err := db.Writer().ExecContext(ctx, "CREATE TABLE parley_probe (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
}

// flakyStore fails its first reads.
type flakyStore struct {
	deviceStore
	fails int
	dev   *store.Device
}

func (f *flakyStore) GetAllDevices(ctx context.Context) ([]*store.Device, error) {
	if f.fails > 0 {
		f.fails--
		return nil, errors.New("database is locked")
	}
	return []*store.Device{f.dev}, nil
}

func TestWaitDeviceRidesOutAnUnreadableStore(t *testing.T) {
	clock := newFakeClock(false)
	a, logs := testAdapter(t, "", newFakeClient(), clock, adapters.Deps{})
	jid := types.JID{User: botPN.User, Server: types.DefaultUserServer, Device: 1}
	st := &flakyStore{fails: 1, dev: &store.Device{ID: &jid}}
	got := make(chan *store.Device, 1)
	go func() { got <- a.waitDevice(context.Background(), st, "not linked", "") }()
	waitHealth(t, a, "unreadable", func(ok bool, d string) bool {
		return !ok && d == "device store unreadable: read the WhatsApp device store: database is locked"
	})
	clock.waitWaits(t, 1)
	clock.fire()
	if dev := <-got; dev == nil || dev.ID != &jid {
		t.Fatalf("device %v", dev)
	}
	if !strings.Contains(logs.String(), "whatsapp device store unreadable; trying again") {
		t.Fatalf("not logged:\n%s", logs)
	}
}

func TestDefaultDeliverBackoff(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 10; n++ {
		got = append(got, defaultDeliverBackoff(n))
	}
	if fmt.Sprint(got) != "[250ms 500ms 1s 2s 4s 8s 16s 30s 30s 30s]" {
		t.Fatalf("backoff %v", got)
	}
}
