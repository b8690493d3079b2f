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
