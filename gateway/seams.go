package gateway

import (
	"context"
	"errors"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

// Runner is who runs turns: the gateway's one way to the agent. Every
// message a session's lane takes goes to Run; the other methods serve the
// chat commands and recovery.
type Runner interface {
	// Run runs one agent turn and returns the reply text ("" for none). A
	// try the database fails under (dbutil.Unavailable) is tried again
	// within Run once it answers, never answering a message twice.
	Run(ctx context.Context, in TurnInput) (reply string, err error)
	// AfterTurn runs on the lane after each turn's reply is queued, before
	// the session's next turn (compaction, for one).
	AfterTurn(ctx context.Context, in TurnInput)
	// Status describes a session for /status; "" lets the gateway say
	// what it knows.
	Status(ctx context.Context, s sessions.Session, queued int) string
	// Compact summarizes a session's older messages for /compact and says
	// what it did, in a line for the user (ErrNoCompaction: it can't).
	Compact(ctx context.Context, s sessions.Session, agentID string) (string, error)
	// Repair finalizes a session whose turn a crash interrupted (orphaned
	// tool calls), before its messages are re-run or marked.
	Repair(ctx context.Context, id sessions.ID) error
	// Answered says whether a turn already answered the message stored
	// under id in a session (a crash or a database fault struck after its
	// reply was stored), and with what text: "" when a later message of
	// the same turn took the reply. A message it answered is not run
	// again, so it is never answered twice.
	Answered(ctx context.Context, s sessions.ID, id sessions.MessageID) (reply string, ok bool, err error)
}

// Channels is who the channels are: the adapter a reply goes out through,
// and whether replies there are shown as they are written. What else a
// channel can do (edit, type, its length limit) the gateway asks the
// adapter itself, through the optional adapters interfaces.
type Channels interface {
	Adapter(id adapters.ID) (adapters.Adapter, bool)
	// Streams reports whether replies on the channel are shown as they are
	// written (the adapter must also be an adapters.Editor).
	Streams(id adapters.ID) bool
}

// ErrNoCompaction is Runner.Compact's answer where compaction isn't
// available.
var ErrNoCompaction = errors.New("compaction is not available here")

// RunFunc runs turns and does nothing else: a Runner for a function, as
// http.HandlerFunc is a Handler (no status of its own, no compaction, no
// repair, nothing answered before).
type RunFunc func(ctx context.Context, in TurnInput) (string, error)

var _ Runner = RunFunc(nil)

func (f RunFunc) Run(ctx context.Context, in TurnInput) (string, error) { return f(ctx, in) }

func (RunFunc) AfterTurn(context.Context, TurnInput) {}

func (RunFunc) Status(context.Context, sessions.Session, int) string { return "" }

func (RunFunc) Compact(context.Context, sessions.Session, string) (string, error) {
	return "", ErrNoCompaction
}

func (RunFunc) Repair(context.Context, sessions.ID) error { return nil }

func (RunFunc) Answered(context.Context, sessions.ID, sessions.MessageID) (string, bool, error) {
	return "", false, nil
}

// noChannels has no adapters: replies are recorded, never sent.
type noChannels struct{}

func (noChannels) Adapter(adapters.ID) (adapters.Adapter, bool) { return nil, false }
func (noChannels) Streams(adapters.ID) bool                     { return false }

// A Reporter is a channel whose messages are runs that report elsewhere:
// cron jobs and webhooks. The reply to one of its messages is not queued
// back to it. Report queues the notes the run sends, in q, the transaction
// that stores the reply's outcome, so they are queued once, with it, under
// the run's key (key is the reply's: its message's inbound id and ":0");
// failed says the turn failed and text is what a chat would have been
// told; files are the files the reply carries (send_file), each to go
// with the notes. Reported is told after that transaction commits; a
// crash in between skips it, so what it does must not be needed for
// delivery.
type Reporter interface {
	Report(ctx context.Context, q dbutil.Querier, in adapters.Inbound, key, text string, files []adapters.OutFile, failed bool) error
	Reported(ctx context.Context, in adapters.Inbound, key, text string, files []adapters.OutFile, failed bool)
}

// Connections keeps people's own tokens for providers (/connect): user is
// "<surface>:<user id>". Connect stores in q, the transaction that records
// the token's message as answered, so the two commit together.
type Connections interface {
	// Providers are the providers tokens can be connected for; none when
	// parley has no secrets key.
	Providers() []string
	Connect(ctx context.Context, q dbutil.Querier, user, provider, token string) error
	Disconnect(ctx context.Context, user, provider string) (bool, error)
}
