// Package whatsapp is the WhatsApp channel, on whatsmeow as a linked
// device of a WhatsApp account.
//
// The adapter has no token: its credential is the linked device, kept by
// whatsmeow's sqlstore in parley's own database (the whatsmeow_* tables,
// beside parley's). `parley whatsapp link --adapter ID` links it (see
// Link). Until a device is linked, and after the phone logs it out, Start
// does not fail the daemon: it logs what to do, reports it through Health
// ("not linked: …", "logged out: …") and looks for a linked device every
// few seconds, so linking from another process needs no restart.
//
// Messages: a contact's chat is ChatID "<phone>@s.whatsapp.net" (its
// session key whatsapp:<jid>), a group's is "<id>@g.us" with UserID the
// sender's JID; Mentioned is set when a group message mentions the linked
// account or replies to it. Text, extended text and captions become Text;
// images, videos, documents, audio and stickers become file references,
// fetched only when asked (Fetch). The account's own messages, status
// updates, channel posts, edits, deletions and protocol messages are not
// taken.
//
// Delivery: whatsmeow acknowledges a message only after the handler
// returns (SynchronousAck), and the handler returns only once the sink
// stored the message, retrying with backoff until the adapter stops. A
// message not stored by then is not acknowledged, so WhatsApp sends it
// again on the next connection; the gateway drops a repeat. A read
// receipt goes out only after the sink took the message.
package whatsapp

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.mau.fi/whatsmeow/store"
	waLog "go.mau.fi/whatsmeow/util/log"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/vault"
)

// MaxMessageLength is the longest reply sent as one WhatsApp message.
// The app takes up to 65,536 characters, but folds a long message behind
// "Read more"; 4,096 is the Business API's cap on a text body and keeps
// each part readable on a phone.
const MaxMessageLength = 4096

// devicePoll is how often Start looks for a linked device while none is.
const devicePoll = 10 * time.Second

func init() { adapters.RegisterNew("whatsapp", New) }

// Adapter is one WhatsApp account, linked as a device.
type Adapter struct {
	id      adapters.ID
	cfg     settings
	log     *slog.Logger
	db      *sql.DB
	dialect string
	vault   *vault.Store // seals the device's keys; nil or keyless: not sealed

	// newClient makes the whatsmeow client for a device; tests fake it.
	newClient func(dev *store.Device, log waLog.Logger) client
	// after waits; tests make it immediate and record the waits.
	after func(d time.Duration) <-chan time.Time
	// deliverBackoff is the wait before delivery attempt n+1.
	deliverBackoff func(n int) time.Duration

	mu     sync.Mutex
	c      client // the live client, nil when there is none
	ok     bool
	detail string
	watch  chan struct{} // closed and replaced on every health change
	quotes *quoteCache
	warned bool // about several stored devices
}

var (
	_ adapters.Adapter = (*Adapter)(nil)
	_ adapters.Limiter = (*Adapter)(nil)
	_ adapters.Typer   = (*Adapter)(nil)
	_ adapters.Fetcher = (*Adapter)(nil)
	_ adapters.Health  = (*Adapter)(nil)
)

// New builds an adapter from its config section. It does not touch the
// database (deps.DB is nil when the config is only being checked); Start
// opens the device store.
func New(id adapters.ID, decode adapters.Decoder, deps adapters.Deps) (*Adapter, error) {
	log := deps.Logger()
	cfg, err := parseConfig(decode)
	if err != nil {
		return nil, err
	}
	if deps.Dialect != "" {
		if _, err := storeDialect(deps.Dialect); err != nil {
			return nil, err
		}
	}
	return &Adapter{
		id: id, cfg: cfg, log: log, db: deps.DB, dialect: deps.Dialect, vault: deps.Vault,
		newClient:      newRealClient,
		after:          time.After,
		deliverBackoff: defaultDeliverBackoff,
		detail:         "starting",
		watch:          make(chan struct{}),
		quotes:         newQuoteCache(1024),
	}, nil
}

// defaultDeliverBackoff doubles from a quarter second to half a minute.
var defaultDeliverBackoff = adapters.Backoff(250*time.Millisecond, 30*time.Second)

// MaxMessageLength implements adapters.Limiter.
func (a *Adapter) MaxMessageLength() int { return MaxMessageLength }

// Health implements adapters.Health: ok only while connected and logged
// in; the detail starts with "connected", "connecting", "disconnected",
// "not linked", "logged out", "replaced", "temporarily banned",
// "client outdated", "connect failure", "device store unreadable",
// "starting" or "stopped".
func (a *Adapter) Health() (ok bool, detail string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ok, a.detail
}

func (a *Adapter) setHealth(ok bool, detail string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ok == ok && a.detail == detail {
		return
	}
	a.ok, a.detail = ok, detail
	close(a.watch)
	a.watch = make(chan struct{})
}

// healthChanged is closed at the next health change.
func (a *Adapter) healthChanged() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.watch
}

func (a *Adapter) linkHint() string {
	return fmt.Sprintf("`parley whatsapp link --adapter %s`", a.id)
}

// Start opens the device store and, once a device is linked, stays
// connected until ctx ends, delivering what arrives to sink. It returns
// an error only when the device store can't be opened (no database, or
// whatsmeow's tables can't be brought up to date); an unlinked or
// logged-out account is reported through Health while Start waits for a
// link.
func (a *Adapter) Start(ctx context.Context, sink adapters.Sink) error {
	defer a.setHealth(false, "stopped")
	if a.db == nil {
		return ErrNoDatabase
	}
	st, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	reason := "not linked"
	var gone string // the device just logged out, until whatsmeow deleted it
	for {
		dev := a.waitDevice(ctx, st, reason, gone)
		if dev == nil {
			return nil // ctx ended
		}
		switch a.session(ctx, a.newClient(dev, newLogger(a.log)), sink) {
		case endLoggedOut:
			reason, gone = "logged out", dev.ID.String()
		case endReplaced:
			<-ctx.Done()
			return nil
		default:
			return nil
		}
	}
}

// waitDevice returns the adapter's linked device, looking again every
// devicePoll while there is none (or the store can't be read); nil once
// ctx ends. why says what Health shows meanwhile ("not linked", "logged
// out"); a device whose JID is gone (one just logged out) doesn't count.
func (a *Adapter) waitDevice(ctx context.Context, st deviceStore, why, gone string) *store.Device {
	logged := false
	for {
		detail := why + ": run " + a.linkHint()
		if why == "logged out" {
			detail = "logged out: link again with " + a.linkHint()
		}
		dev, err := a.device(ctx, st)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			a.log.WarnContext(ctx, "whatsapp device store unreadable; trying again", "error", err, "retry_in", devicePoll)
			detail = "device store unreadable: " + err.Error()
		case dev != nil && dev.ID.String() != gone:
			return dev
		case !logged:
			logged = true
			if why != "logged out" { // the session logged that one
				a.log.WarnContext(ctx, "whatsapp not linked: run parley whatsapp link", "command", "parley whatsapp link --adapter "+string(a.id), "device", a.cfg.device)
			}
		}
		a.setHealth(false, detail)
		select {
		case <-ctx.Done():
			return nil
		case <-a.after(devicePoll):
		}
	}
}

// client is the live client, or nil.
func (a *Adapter) client() client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.c
}

func (a *Adapter) setClient(c client) {
	a.mu.Lock()
	a.c = c
	a.mu.Unlock()
}
