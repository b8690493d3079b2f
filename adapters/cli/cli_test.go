package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLinesBecomeMessagesAndRepliesPrint(t *testing.T) {
	out := &syncBuf{}
	a := New("cli", strings.NewReader("hello\n\n  second line  \n"), out, "ann")
	var got []adapters.Inbound
	sink := adapters.SinkFunc(func(ctx context.Context, in adapters.Inbound) error {
		if err := in.Validate(); err != nil {
			return err
		}
		got = append(got, in)
		_, err := a.Send(ctx, adapters.Outbound{ChatID: in.ChatID, Text: "echo: " + in.Text})
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Start(ctx, sink); !errors.Is(err, io.EOF) {
		t.Fatalf("Start = %v, want io.EOF at the end of input", err)
	}
	if len(got) != 2 || got[0].Text != "hello" || got[1].Text != "second line" {
		t.Fatalf("delivered %+v", got)
	}
	if got[0].Surface != "cli" || got[0].ChatID != "chat" || got[0].UserID != "ann" || got[0].MessageID == got[1].MessageID {
		t.Fatalf("envelope %+v", got[0])
	}
	if want := "> echo: hello\n> > echo: second line\n> "; out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
}

// A streamed reply prints what each update adds, on one line, and its
// final text ends the line with the prompt; a rewrite is shown whole.
func TestStreamedReplyPrintsAsItIsWritten(t *testing.T) {
	out := &syncBuf{}
	a := New("cli", strings.NewReader(""), out, "ann")
	ctx := context.Background()
	sent, err := a.Send(ctx, adapters.Outbound{ChatID: ChatID, Text: "Hel" + adapters.StreamingMark})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"Hello, wo" + adapters.StreamingMark, "Hello, world."} {
		if err := a.Edit(ctx, ChatID, sent.MessageID, text); err != nil {
			t.Fatal(err)
		}
	}
	if want := "Hello, world.\n> "; out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
	sent, _ = a.Send(ctx, adapters.Outbound{ChatID: ChatID, Text: "Draft" + adapters.StreamingMark})
	if err := a.Edit(ctx, ChatID, sent.MessageID, "Final answer"); err != nil {
		t.Fatal(err)
	}
	if want := "Hello, world.\n> Draft\nFinal answer\n> "; out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
}

// /quit ends the chat without sending anything; Ctrl-C (Interrupt) while a
// reply is awaited sends /stop, and with nothing awaited says to quit.
func TestQuitAndInterrupt(t *testing.T) {
	out := &syncBuf{}
	in, w := io.Pipe()
	a := New("cli", in, out, "ann")
	delivered := make(chan string, 4)
	sink := adapters.SinkFunc(func(ctx context.Context, in adapters.Inbound) error {
		delivered <- in.Text
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx, sink) }()
	if _, err := io.WriteString(w, "a long question\n"); err != nil {
		t.Fatal(err)
	}
	if got := <-delivered; got != "a long question" {
		t.Fatalf("delivered %q", got)
	}
	if !a.Interrupt() {
		t.Fatal("Interrupt while a reply is awaited didn't stop the turn")
	}
	if got := <-delivered; got != "/stop" {
		t.Fatalf("Ctrl-C delivered %q, want /stop", got)
	}
	if a.Interrupt() {
		t.Fatal("a second Interrupt, nothing awaited, didn't say to quit")
	}
	if _, err := io.WriteString(w, "/quit\n"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("Start after /quit = %v, want io.EOF", err)
	}
	select {
	case got := <-delivered:
		t.Fatalf("/quit was delivered as %q", got)
	default:
	}
}
