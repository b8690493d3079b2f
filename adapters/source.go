package adapters

import "github.com/parleyd/parley/permissions"

// A Source is what a producer of messages declares it can do: chat
// channels, cron, webhooks, the API, MCP and the terminal all hand the
// gateway adapters.Inbound, and everything that treats them differently
// asks their declaration (SourceOf), never their id.
type Source struct {
	// Name is what the start-up log calls it ("cron"); "" for a chat
	// channel, which is logged by its adapter id.
	Name string
	// Started, if set, gives the start-up log's details ("jobs", 3).
	Started func() []any
	// Replies says where a reply to one of its messages goes.
	Replies Replies
	// Asks says who answers a tool call's permission question in its
	// turns.
	Asks Asks
	// Unattended is the policy that answers for a source nobody watches
	// (Asks is AskPolicy): the tools a run of chatID may use, and where
	// the config allows them.
	Unattended func(chatID string) *permissions.Unattended
}

// Replies is where a source's replies go.
type Replies int

const (
	// RepliesToChat: through the outbox, once, to the chat the message
	// came from (a chat channel).
	RepliesToChat Replies = iota
	// RepliesReported: the run reports elsewhere (cron's and webhooks'
	// notify targets): the source implements gateway.Reporter, and no
	// outbox row is queued for the run's own chat.
	RepliesReported
	// RepliesToCaller: the caller follows the run and reads its reply (the
	// API, MCP): nothing is queued.
	RepliesToCaller
)

// Asks is who answers a permission question in a source's turns.
type Asks int

const (
	// AskInChat: the person, in the chat, with buttons or numbers.
	AskInChat Asks = iota
	// AskCaller: the API's caller, through the permissions route.
	AskCaller
	// AskPolicy: nobody watches; the source's Unattended policy answers.
	AskPolicy
	// AskNobody: the source takes one reply and nothing else (parley ask,
	// MCP's send_message); questions are denied at once.
	AskNobody
)

// A Declarer declares what it is as a source. A channel that doesn't is a
// chat: its replies go back to the chat and its people are asked there.
type Declarer interface {
	Source() Source
}

// SourceOf is what a declares, or a chat's declaration.
func SourceOf(a Adapter) Source {
	if d, ok := a.(Declarer); ok {
		return d.Source()
	}
	return Source{Replies: RepliesToChat, Asks: AskInChat}
}
