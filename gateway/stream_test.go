package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
)

// A streamed reply shows its start as one message, then ends as that same
// message with the whole text: the final edit goes through the outbox.
func TestStreamedReplyEndsAsOneMessage(t *testing.T) {
	var r *rig
	r = newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
		if in.OnText == nil {
			return "", fmt.Errorf("no streaming")
		}
		in.OnText("Hello")
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := r.rec.WaitSent(wctx, 1); err != nil { // the partial is on screen
			return "", err
		}
		in.OnText(", world")
		return "Hello, world", nil
	}, nil)
	in := msg("1", "hi")
	in.Adapter = "tg-stream"
	r.deliver(in)
	waitUnfinished(t, r.store, 0)
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	edits, err := r.rec.WaitEdits(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.rec.Visible("42"); len(got) != 1 || got[0] != "Hello, world" {
		t.Fatalf("the chat shows %q (edits %+v)", got, edits)
	}
	if first := r.rec.Sent()[0].Text; first != "Hello …" {
		t.Fatalf("the partial was %q", first)
	}
}

// Twenty conversations stream at once; every one ends with its whole reply
// on screen, once, however the edits interleave.
func TestStreamedRepliesUnderLoad(t *testing.T) {
	for run := range 10 {
		t.Run(fmt.Sprint("run", run), func(t *testing.T) {
			r := newRig(t, dbtest.SQLite(t), func(ctx context.Context, in gateway.TurnInput) (string, error) {
				var b strings.Builder
				for i := range 30 {
					piece := fmt.Sprintf("%s-%d ", in.Messages[0].ChatID, i)
					b.WriteString(piece)
					if in.OnText != nil {
						in.OnText(piece)
					}
					if i%10 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
				return b.String(), nil
			}, nil)
			var wg sync.WaitGroup
			for c := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					in := msg(fmt.Sprint("m", c), "go")
					in.Adapter, in.ChatID = "tg-stream", fmt.Sprint("chat", c)
					r.deliver(in)
				}()
			}
			wg.Wait()
			waitUnfinished(t, r.store, 0)
			deadline := time.Now().Add(10 * time.Second)
			for c := range 20 {
				chat := fmt.Sprint("chat", c)
				var want strings.Builder
				for i := range 30 {
					fmt.Fprintf(&want, "%s-%d ", chat, i)
				}
				for {
					got := r.rec.Visible(chat)
					if len(got) == 1 && got[0] == strings.TrimSpace(want.String()) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s shows %q", chat, got)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if len(r.rec.Edits()) == 0 {
				t.Fatal("no reply was shown while it was written")
			}
		})
	}
}
