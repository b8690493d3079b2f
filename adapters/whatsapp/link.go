package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mdp/qrterminal/v3"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/parleyd/parley/adapters"
)

const (
	// linkTimeout bounds a whole linking; WhatsApp's own codes run out
	// after about 160 seconds.
	linkTimeout = 5 * time.Minute
	// linkSettle is how long Link waits, after the phone confirmed, for
	// the first connection as the new device.
	linkSettle = 30 * time.Second
	// pairDisplayName is how a code-paired device is named to WhatsApp,
	// which takes only "Browser (OS)" names it knows.
	pairDisplayName = "Chrome (Linux)"
)

// Link links a WhatsApp account to the adapter ad (built by the
// "whatsapp" factory with parley's database in its Deps) as a new linked
// device, kept in the database's device store. With phone empty it shows
// QR codes on out for the phone to scan; with the account's phone number
// it shows a pairing code to type on the phone instead. It returns once
// WhatsApp confirmed the link, or with ErrAlreadyLinked when the adapter
// has a linked device already.
//
// The daemon, if running, finds the new device within a few seconds; on
// SQLite the database is locked by a running daemon, so link with the
// daemon stopped.
func Link(ctx context.Context, ad adapters.Adapter, out io.Writer, phone string) error {
	a, ok := ad.(*Adapter)
	if !ok {
		return fmt.Errorf("whatsapp link: the adapter is a %T, not a WhatsApp adapter", ad)
	}
	return a.link(ctx, out, phone)
}

func (a *Adapter) link(ctx context.Context, out io.Writer, phone string) error {
	var user string
	if phone != "" {
		var err error
		if user, err = phoneUser(phone); err != nil {
			return fmt.Errorf("phone number %q %v; give it in international form, e.g. +4915123456789", phone, err)
		}
		if a.cfg.device != "" && user != a.cfg.device {
			return fmt.Errorf("phone number %s is not this adapter's device (%s in its config)", user, a.cfg.device)
		}
	}
	st, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	dev, err := a.device(ctx, st)
	if err != nil {
		return err
	}
	if dev != nil {
		hint := "to link it again, remove it on the phone (WhatsApp → Settings → Linked devices) and run this again once parley reports it logged out"
		if a.cfg.device == "" {
			hint += fmt.Sprintf("; to link another number, give adapter %s its own device: <number> in the config", a.id)
		}
		return fmt.Errorf("%w: adapter %s uses %s; %s", ErrAlreadyLinked, a.id, dev.ID.ToNonAD(), hint)
	}

	ctx, cancel := context.WithTimeout(ctx, linkTimeout)
	defer cancel()
	c := a.newClient(st.NewDevice(), newLogger(a.log))
	settled := make(chan struct{}, 1)
	handler := c.AddEventHandlerWithSuccessStatus(func(evt any) bool {
		switch evt.(type) {
		case *events.Connected, *events.StreamReplaced:
			select {
			case settled <- struct{}{}:
			default:
			}
		}
		return true
	})
	defer c.RemoveEventHandler(handler)
	qr, err := c.GetQRChannel(ctx)
	if err != nil {
		return fmt.Errorf("whatsapp link: %w", err)
	}
	if err := c.Connect(); err != nil {
		return fmt.Errorf("whatsapp link: connect to WhatsApp: %w", err)
	}
	defer c.Disconnect()

	shown := false
	for {
		var item whatsmeow.QRChannelItem
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w: not confirmed within %s; run it again", ErrLinkFailed, linkTimeout)
			}
			return ctx.Err()
		case it, ok := <-qr:
			if !ok {
				return fmt.Errorf("%w: WhatsApp closed the linking without an answer; run it again", ErrLinkFailed)
			}
			item = it
		}
		switch item.Event {
		case whatsmeow.QRChannelEventCode:
			if phone == "" {
				showQR(out, item, shown)
			} else if !shown {
				code, err := c.PairPhone(ctx, user, true, whatsmeow.PairClientChrome, pairDisplayName)
				if err != nil {
					return fmt.Errorf("%w: ask WhatsApp for a pairing code for %s: %v", ErrLinkFailed, user, err)
				}
				fmt.Fprintf(out, "Pairing code for +%s:\n\n    %s\n\n"+
					"On the phone: WhatsApp → Settings → Linked devices → Link a device →\n"+
					"\"Link with phone number instead\", then type the code. It expires in about two minutes.\n", user, code)
			}
			shown = true
		case whatsmeow.QRChannelSuccess.Event:
			select {
			case <-settled:
			case <-time.After(linkSettle):
			case <-ctx.Done():
			}
			pn, _ := c.ownJIDs()
			fmt.Fprintf(out, "Linked: adapter %s is WhatsApp +%s. parley run connects it.\n", a.id, pn.User)
			if a.cfg.device != "" && pn.User != a.cfg.device {
				fmt.Fprintf(out, "Note: the adapter's config says device: %s, so it won't use this one; set device: \"%s\".\n", a.cfg.device, pn.User)
			}
			return nil
		case whatsmeow.QRChannelTimeout.Event:
			return fmt.Errorf("%w: the code was not used in time; run it again", ErrLinkFailed)
		case whatsmeow.QRChannelScannedWithoutMultidevice.Event:
			fmt.Fprintln(out, "The phone's WhatsApp has no multi-device support; update it and scan again.")
		case whatsmeow.QRChannelClientOutdated.Event:
			return fmt.Errorf("%w: WhatsApp refused this client version; update parley", ErrLinkFailed)
		case whatsmeow.QRChannelEventPasskeyRequest:
			return fmt.Errorf("%w: WhatsApp asked for a passkey, which parley can't give; try the other way (with or without --phone)", ErrLinkFailed)
		case whatsmeow.QRChannelEventError:
			return fmt.Errorf("%w: %v", ErrLinkFailed, item.Error)
		default:
			return fmt.Errorf("%w: unexpected answer %q from WhatsApp; run it again", ErrLinkFailed, item.Event)
		}
	}
}

// showQR prints one QR code; the first comes with the instructions.
func showQR(out io.Writer, item whatsmeow.QRChannelItem, again bool) {
	if again {
		fmt.Fprintln(out, "\nThat code expired; here is a new one:")
	} else {
		fmt.Fprintln(out, "On the phone: WhatsApp → Settings → Linked devices → Link a device, then scan this code:")
	}
	fmt.Fprintln(out)
	qrterminal.GenerateWithConfig(item.Code, qrterminal.Config{
		Level:          qrterminal.L,
		Writer:         out,
		HalfBlocks:     true,
		BlackChar:      qrterminal.BLACK_BLACK,
		WhiteBlackChar: qrterminal.WHITE_BLACK,
		WhiteChar:      qrterminal.WHITE_WHITE,
		BlackWhiteChar: qrterminal.BLACK_WHITE,
		QuietZone:      2,
	})
	fmt.Fprintf(out, "\n(valid for %s)\n", item.Timeout.Round(time.Second))
}
