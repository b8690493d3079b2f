// Package commands is the table of chat commands (/reset, /stop, /status,
// /compact, /connect, /disconnect, /model, /think, /undo, /retry, /help) and their parsing. The gateway runs them in every chat,
// `parley chat --server` runs them through the HTTP API's routes, and the
// API names those routes when a command is sent to it as a message. Each
// row carries what its command does, through a Runtime, so a new command
// is one row. It imports nothing of parley's, so anything may use it.
package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Mode says when the gateway runs a command.
type Mode int

const (
	// AtOnce commands are answered outside the session's lane, so they
	// work while a turn runs.
	AtOnce Mode = iota
	// Barrier commands take their place in the session's queue and run
	// between turns: what was sent before them is answered first.
	Barrier
)

// Command is one chat command.
type Command struct {
	// Name is the command without its slash.
	Name string
	// Aliases are other names that run it.
	Aliases []string
	// Help says what it does, in a line of the /help reply.
	Help string
	Mode Mode
	// Interrupts stops the session's running turn as the command arrives,
	// so a barrier command comes promptly.
	Interrupts bool
	// Route is the HTTP API route that does the command's work, and what it
	// does: a command sent to the API as a message is refused naming it.
	// "" for a command with no route of its own (/help).
	Route string
	// Arg names the one argument the command takes, as /help shows it
	// ("<provider>"); "" for none.
	Arg string
	// Run is what the command does, through the runtime of the place it
	// was typed in; arg is its argument ("" when none).
	Run func(ctx context.Context, rt Runtime, arg string) (string, error)
}

// Runtime is where a chat command runs: a chat, through the gateway, or a
// session over the HTTP API, through `parley chat --server`. Each does
// these its own way; a command is a row of All that uses them.
type Runtime interface {
	// Stop stops the session's running turn, keeping its partial answer.
	Stop(ctx context.Context) (string, error)
	// Status describes the session, its run and its queue.
	Status(ctx context.Context) (string, error)
	// Reset archives the session and starts a new one.
	Reset(ctx context.Context) (string, error)
	// Compact summarizes the session's older messages now.
	Compact(ctx context.Context) (string, error)
	// Connect starts storing the person's own token for provider.
	Connect(ctx context.Context, provider string) (string, error)
	// Disconnect forgets the person's token for provider.
	Disconnect(ctx context.Context, provider string) (string, error)
	// Model lists the models the session's agent allows, with the one in
	// use, when name is ""; else it sets the session's model to name,
	// from then on, or refuses a model the agent doesn't allow.
	Model(ctx context.Context, name string) (string, error)
	// Think shows the session's reasoning effort when level is ""; else it
	// sets it (one of Efforts), from then on.
	Think(ctx context.Context, level string) (string, error)
	// Voice shows whether the session's replies are spoken when setting
	// is ""; else it sets it ("on" or "off"), from then on.
	Voice(ctx context.Context, setting string) (string, error)
	// Undo takes back the session's last exchange: the last message sent
	// and its answer are hidden, kept, not deleted.
	Undo(ctx context.Context) (string, error)
	// Retry answers the session's last message again, in place of its
	// answer (which is kept, hidden).
	Retry(ctx context.Context) (string, error)
}

// Efforts are what /think takes: off sends no reasoning effort, whatever
// the agent's config says.
var Efforts = []string{"off", "low", "medium", "high"}

// Do runs c in rt with arg.
func (c Command) Do(ctx context.Context, rt Runtime, arg string) (string, error) {
	if c.Run == nil {
		return "/" + c.Name + " is not available here.", nil
	}
	return c.Run(ctx, rt, arg)
}

// All is every chat command, in the order /help lists them.
var All = []Command{
	{Name: "reset", Aliases: []string{"new"}, Mode: Barrier, Interrupts: true,
		Help:  "start a new conversation; it stops the running turn, and messages sent before it are answered first",
		Route: `POST /v1/agent/reset with {"session_id": ...} starts a new session`,
		Run:   func(ctx context.Context, rt Runtime, _ string) (string, error) { return rt.Reset(ctx) }},
	{Name: "stop", Mode: AtOnce,
		Help:  "stop the running turn, keeping its partial answer",
		Route: "POST /v1/sessions/{id}/abort stops the run",
		Run:   func(ctx context.Context, rt Runtime, _ string) (string, error) { return rt.Stop(ctx) }},
	{Name: "status", Mode: AtOnce,
		Help:  "show the session, its model and tokens, the queue and the last failure",
		Route: "GET /v1/sessions/{id}/status tells the run's state (and GET /v1/sessions/{id} the session's)",
		Run:   func(ctx context.Context, rt Runtime, _ string) (string, error) { return rt.Status(ctx) }},
	{Name: "compact", Mode: Barrier,
		Help:  "summarize the conversation's older messages now, between turns",
		Route: "POST /v1/sessions/{id}/compact compacts the session",
		Run:   func(ctx context.Context, rt Runtime, _ string) (string, error) { return rt.Compact(ctx) }},
	{Name: "connect", Mode: AtOnce, Arg: "<provider>",
		Help:  "in a direct chat, store your own token for a provider's tools (such as github): your next message is the token, kept encrypted and never shown to the assistant",
		Route: "PUT /v1/users/{surface}/{user}/connections/{provider} with {\"token\": ...} stores a person's token",
		Run: func(ctx context.Context, rt Runtime, arg string) (string, error) {
			return rt.Connect(ctx, strings.ToLower(strings.TrimSpace(arg)))
		}},
	{Name: "disconnect", Mode: AtOnce, Arg: "<provider>",
		Help:  "forget your token for a provider",
		Route: "DELETE /v1/users/{surface}/{user}/connections/{provider} forgets it",
		Run: func(ctx context.Context, rt Runtime, arg string) (string, error) {
			return rt.Disconnect(ctx, strings.ToLower(strings.TrimSpace(arg)))
		}},
	{Name: "model", Mode: AtOnce, Arg: "[name]",
		Help:  "list the models this agent allows, or switch this conversation to one, from the next message on",
		Route: `PATCH /v1/sessions/{id} with {"model": ...} sets the session's model; GET /v1/sessions/{id}/models lists the allowed ones`,
		Run: func(ctx context.Context, rt Runtime, arg string) (string, error) {
			return rt.Model(ctx, strings.TrimSpace(arg))
		}},
	{Name: "think", Mode: AtOnce, Arg: "[off|low|medium|high]",
		Help:  "show or set how much a reasoning model thinks before answering in this conversation",
		Route: `PATCH /v1/sessions/{id} with {"metadata": {"reasoning_effort": "off|low|medium|high"}} sets it`,
		Run: func(ctx context.Context, rt Runtime, arg string) (string, error) {
			level := strings.ToLower(strings.TrimSpace(arg))
			if level != "" && !slices.Contains(Efforts, level) {
				return fmt.Sprintf("%q is not a thinking level; use /think off, low, medium or high. Nothing changed.", arg), nil
			}
			return rt.Think(ctx, level)
		}},
	{Name: "voice", Mode: AtOnce, Arg: "[on|off]",
		Help:  "show, or turn on or off, spoken replies (voice notes) in this conversation",
		Route: `PATCH /v1/sessions/{id} with {"metadata": {"voice": "on|off"}} sets it`,
		Run: func(ctx context.Context, rt Runtime, arg string) (string, error) {
			setting := strings.ToLower(strings.TrimSpace(arg))
			if setting != "" && setting != "on" && setting != "off" {
				return fmt.Sprintf("%q is not a voice setting; use /voice on or /voice off. Nothing changed.", arg), nil
			}
			return rt.Voice(ctx, setting)
		}},
	{Name: "undo", Mode: Barrier,
		Help:  "take back the last message and its answer (kept in the history, hidden from the conversation)",
		Route: `POST /v1/sessions/{id}/rewind with {"message_id": <the last user message>, "inclusive": true} hides it and its answer`,
		Run:   func(ctx context.Context, rt Runtime, _ string) (string, error) { return rt.Undo(ctx) }},
	{Name: "retry", Mode: Barrier,
		Help:  "answer the last message again (the old answer is kept, hidden)",
		Route: `POST /v1/sessions/{id}/rewind with {"message_id": <the last user message>, "inclusive": true}, then POST /v1/sessions/{id}/messages with its content`,
		Run:   func(ctx context.Context, rt Runtime, _ string) (string, error) { return rt.Retry(ctx) }},
	{Name: "help", Mode: AtOnce,
		Help: "list these commands"}, // Run: set in init, as it reads All
}

func init() {
	for i := range All {
		if All[i].Name == "help" {
			All[i].Run = func(context.Context, Runtime, string) (string, error) { return Help(), nil }
		}
	}
}

// Parse recognises a chat command: a name or alias of one in All, in any
// case, after a slash, with an optional @botname suffix, alone on the
// message or, for a command that takes an argument, followed by it.
func Parse(text string) (Command, bool) {
	c, _, ok := ParseArg(text)
	return c, ok
}

// ParseArg is Parse that also returns the command's argument ("" when
// none was given).
func ParseArg(text string) (Command, string, bool) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "/") {
		return Command{}, "", false
	}
	fields := strings.Fields(t[1:])
	if len(fields) == 0 {
		return Command{}, "", false
	}
	name, _, _ := strings.Cut(fields[0], "@")
	c, ok := lookup(name)
	if !ok || (len(fields) > 1 && c.Arg == "") {
		return Command{}, "", false
	}
	return c, strings.Join(fields[1:], " "), true
}

// lookup finds a command by its name or an alias, in any case, without the
// slash.
func lookup(name string) (Command, bool) {
	for _, c := range All {
		if strings.EqualFold(c.Name, name) {
			return c, true
		}
		for _, a := range c.Aliases {
			if strings.EqualFold(a, name) {
				return c, true
			}
		}
	}
	return Command{}, false
}

// Help is the /help reply: a line for each command, with its aliases.
func Help() string {
	var b strings.Builder
	b.WriteString("Commands:")
	for _, c := range All {
		b.WriteString("\n/" + c.Name)
		if c.Arg != "" {
			b.WriteString(" " + c.Arg)
		}
		for _, a := range c.Aliases {
			b.WriteString(" (or /" + a + ")")
		}
		b.WriteString(": " + c.Help)
	}
	return b.String()
}

// Routes is each command's API route, for a refusal naming them all: "/reset:
// POST /v1/agent/reset ...; /stop: ...".
func Routes() string {
	var rs []string
	for _, c := range All {
		if c.Route != "" {
			rs = append(rs, "/"+c.Name+": "+c.Route)
		}
	}
	return strings.Join(rs, "; ")
}
