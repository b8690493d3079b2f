package whatsapp

import "errors"

var (
	// ErrAlreadyLinked means Link found the adapter's device linked already.
	ErrAlreadyLinked = errors.New("WhatsApp is already linked")
	// ErrNotConnected means a send found no live connection to WhatsApp.
	ErrNotConnected = errors.New("WhatsApp is not connected")
	// ErrBadChatID means a chat id is not a WhatsApp JID this adapter sends to.
	ErrBadChatID = errors.New("not a WhatsApp chat id")
	// ErrNoDatabase means the adapter was started without parley's
	// database, where its device lives.
	ErrNoDatabase = errors.New("the WhatsApp adapter needs parley's database for its device store")
	// ErrLinkFailed means linking ended without a linked device.
	ErrLinkFailed = errors.New("WhatsApp linking failed")
)
