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

// Adapter reads messages from In and writes replies to Out.
type Adapter struct {
	id     adapters.ID
	in     io.Reader
	out    io.Writer
	user   string
	mu     sync.Mutex
	nextID int
}

var _ adapters.Adapter = (*Adapter)(nil)

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
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			in := adapters.Inbound{Adapter: a.id, Surface: Surface, ChatID: ChatID, UserID: a.user,
				DisplayName: a.user, MessageID: id.String(), Text: text, Time: time.Now()}
			if err := sink.Deliver(ctx, in); err != nil {
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

// Send prints a reply.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	a.mu.Lock()
	a.nextID++
	n := a.nextID
	_, err := fmt.Fprintf(a.out, "%s\n> ", out.Text)
	a.mu.Unlock()
	if err != nil {
		return adapters.Sent{}, err
	}
	return adapters.Sent{MessageID: fmt.Sprintf("cli-%d", n)}, nil
}
