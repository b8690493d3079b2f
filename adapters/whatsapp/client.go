package whatsapp

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	waLog "go.mau.fi/whatsmeow/util/log"
)

// client is the part of whatsmeow the adapter uses. whatsmeow can't be
// faked at the wire (its handshake pins WhatsApp's key), so tests put a
// fake here and drive it with real events.Message values.
type client interface {
	Connect() error
	Disconnect()
	IsConnected() bool
	IsLoggedIn() bool
	AddEventHandlerWithSuccessStatus(handler whatsmeow.EventHandlerWithSuccessStatus) uint32
	RemoveEventHandler(id uint32) bool

	SendMessage(ctx context.Context, to types.JID, msg *waE2E.Message, extra ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error)
	MarkRead(ctx context.Context, ids []types.MessageID, at time.Time, chat, sender types.JID, receiptType ...types.ReceiptType) error
	SendChatPresence(ctx context.Context, jid types.JID, state types.ChatPresence, media types.ChatPresenceMedia) error
	SendPresence(ctx context.Context, state types.Presence) error
	Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error)
	Upload(ctx context.Context, plaintext []byte, appInfo whatsmeow.MediaType) (whatsmeow.UploadResponse, error)

	GetQRChannel(ctx context.Context) (<-chan whatsmeow.QRChannelItem, error)
	PairPhone(ctx context.Context, phone string, showPushNotification bool, clientType whatsmeow.PairClientType, clientDisplayName string) (string, error)

	// ownJIDs is the linked account: its phone-number JID and its LID,
	// both without a device part (empty before linking).
	ownJIDs() (pn, lid types.JID)
	// pnForLID is the phone-number JID WhatsApp told for a LID, or the
	// empty JID when it is unknown.
	pnForLID(ctx context.Context, lid types.JID) types.JID
}

// realClient is whatsmeow's client with the device-store lookups.
type realClient struct {
	*whatsmeow.Client
}

// newRealClient makes a whatsmeow client for dev. The adapter reconnects
// itself (with its own bounded backoff), acknowledges a message only
// after its handler took it (SynchronousAck), and keeps each decrypted
// message until then (EnableDecryptedEventBuffer), so a message whose
// delivery failed is decrypted again when WhatsApp sends it again.
func newRealClient(dev *store.Device, log waLog.Logger) client {
	c := whatsmeow.NewClient(dev, log)
	c.EnableAutoReconnect = false
	c.SynchronousAck = true
	c.EnableDecryptedEventBuffer = true
	return realClient{c}
}

func (c realClient) ownJIDs() (pn, lid types.JID) {
	if c.Store == nil {
		return types.EmptyJID, types.EmptyJID
	}
	if c.Store.ID != nil {
		pn = c.Store.ID.ToNonAD()
	}
	return pn, c.Store.GetLID().ToNonAD()
}

func (c realClient) pnForLID(ctx context.Context, lid types.JID) types.JID {
	if c.Store == nil || c.Store.LIDs == nil {
		return types.EmptyJID
	}
	pn, err := c.Store.LIDs.GetPNForLID(ctx, lid)
	if err != nil {
		return types.EmptyJID
	}
	return pn
}

// slogLogger hands whatsmeow's log lines to slog. whatsmeow's info lines
// are chatter about its own protocol work, so they go to debug; the
// frame dumps ("Send", "Recv") and the QR emitter's lines, which carry
// pairing secrets, are dropped.
type slogLogger struct {
	log    *slog.Logger
	module string
}

func newLogger(log *slog.Logger) waLog.Logger { return slogLogger{log: log, module: "whatsmeow"} }

func (l slogLogger) line(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, "whatsmeow", "module", l.module, "detail", fmt.Sprintf(format, args...))
}

func (l slogLogger) Errorf(format string, args ...any) { l.line(slog.LevelError, format, args) }
func (l slogLogger) Warnf(format string, args ...any)  { l.line(slog.LevelWarn, format, args) }
func (l slogLogger) Infof(format string, args ...any)  { l.line(slog.LevelDebug, format, args) }
func (l slogLogger) Debugf(format string, args ...any) { l.line(slog.LevelDebug-4, format, args) }

func (l slogLogger) Sub(module string) waLog.Logger {
	switch module {
	case "Send", "Recv", "QRChannel":
		return waLog.Noop
	}
	return slogLogger{log: l.log, module: strings.Join([]string{l.module, module}, "/")}
}
