// Package cli is the terminal channel behind `parley chat`: lines typed on
// standard input become messages in the session cli:chat, which lasts
// across restarts, and replies are printed as they are sent.
package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
)

// Surface and chat id of the CLI session: its key reads "cli:chat".
const (
	Surface = "cli"
	ChatID  = "chat"
)

// Adapter reads messages from In and writes replies to Out, as they are
// written.
type Adapter struct {
	id   adapters.ID
	in   io.Reader
	out  io.Writer
	user string

	mu      sync.Mutex
	nextID  int
	printed map[string]string // what each streamed reply has shown so far
	busy    bool              // a message waits for its reply
	sink    adapters.Sink
	ctx     context.Context
}

var (
	_ adapters.Adapter     = (*Adapter)(nil)
	_ adapters.Editor      = (*Adapter)(nil)
	_ adapters.StreamPacer = (*Adapter)(nil)
	_ adapters.StatusLiner = (*Adapter)(nil)
)

// StatusLine shows what the turn is doing on a line of its own.
func (a *Adapter) StatusLine(_ context.Context, _ string, line string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(a.out, "\n(%s)\n", line)
}

// Streams says the terminal shows replies as they are written.
func (a *Adapter) Streams() bool { return true }

// StreamEvery is how often a reply being written is shown.
func (a *Adapter) StreamEvery() time.Duration { return 50 * time.Millisecond }

// quitCommands end the chat.
var quitCommands = map[string]bool{"/quit": true, "/exit": true, "/q": true}

// New returns a CLI adapter for user (the local account name).
func New(id adapters.ID, in io.Reader, out io.Writer, user string) *Adapter {
	if user == "" {
		user = "local"
	}
	return &Adapter{id: id, in: in, out: out, user: user}
}

// Start reads lines until In ends or ctx is cancelled, delivering each
// non-empty line. Replies print as they are sent, each followed by a prompt.
func (a *Adapter) Start(ctx context.Context, sink adapters.Sink) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(a.in)
		sc.Buffer(make([]byte, 64*1024), adapters.MaxTextBytes)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	a.mu.Lock()
	a.sink, a.ctx = sink, ctx
	a.mu.Unlock()
	a.prompt()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("read input: %w", err)
			}
			return io.EOF
		case line := <-lines:
			text := strings.TrimSpace(line)
			if text == "" {
				a.prompt()
				continue
			}
			if quitCommands[strings.ToLower(text)] {
				return io.EOF
			}
			if !strings.HasPrefix(text, "/") {
				a.setBusy(true)
			}
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			in := adapters.Inbound{Adapter: a.id, Surface: Surface, ChatID: ChatID, UserID: a.user,
				DisplayName: a.user, MessageID: id.String(), Text: text, Time: time.Now()}
			if err := sink.Deliver(ctx, in); err != nil {
				a.setBusy(false)
				fmt.Fprintf(a.out, "could not take that message: %v\n", err)
				a.prompt()
			}
			// No waiting for the answer: input keeps being read, so /stop
			// works mid-turn, and Send brings the prompt back with the reply.
		}
	}
}

func (a *Adapter) prompt() {
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprint(a.out, "> ")
}

// Send prints a reply, or the start of one being written.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextID++
	id := fmt.Sprintf("cli-%d", a.nextID)
	if text, partial := strings.CutSuffix(out.Text, adapters.StreamingMark); partial {
		if a.printed == nil {
			a.printed = map[string]string{}
		}
		a.printed[id] = text
		_, err := fmt.Fprint(a.out, text)
		return adapters.Sent{MessageID: id}, err
	}
	a.busy = false
	if _, err := fmt.Fprintf(a.out, "%s\n> ", out.Text); err != nil {
		return adapters.Sent{}, err
	}
	return adapters.Sent{MessageID: id}, nil
}

// Edit prints what a reply being written added since it was last shown;
// its final text ends the line.
func (a *Adapter) Edit(ctx context.Context, chatID, messageID, text string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	shown, known := a.printed[messageID]
	text, partial := strings.CutSuffix(text, adapters.StreamingMark)
	var err error
	if rest, ok := strings.CutPrefix(text, shown); ok && known {
		_, err = fmt.Fprint(a.out, rest)
	} else {
		// Not a continuation of what was shown: show it whole.
		_, err = fmt.Fprint(a.out, "\n"+text)
	}
	if partial {
		a.printed[messageID] = text
		return err
	}
	delete(a.printed, messageID)
	a.busy = false
	if err == nil {
		_, err = fmt.Fprint(a.out, "\n> ")
	}
	return err
}

func (a *Adapter) setBusy(b bool) {
	a.mu.Lock()
	a.busy = b
	a.mu.Unlock()
}

// Interrupt is Ctrl-C: while a reply is awaited it stops the turn (as
// /stop does) and returns true; otherwise it returns false, and the caller
// ends the chat.
func (a *Adapter) Interrupt() bool {
	a.mu.Lock()
	busy, sink, ctx := a.busy, a.sink, a.ctx
	a.busy = false
	a.mu.Unlock()
	if !busy || sink == nil {
		return false
	}
	id, err := uuid.NewV7()
	if err != nil {
		return false
	}
	fmt.Fprintln(a.out, "\n(stopping; Ctrl-C again to quit)")
	err = sink.Deliver(ctx, adapters.Inbound{Adapter: a.id, Surface: Surface, ChatID: ChatID, UserID: a.user,
		DisplayName: a.user, MessageID: id.String(), Text: "/stop", Time: time.Now()})
	return err == nil
}
