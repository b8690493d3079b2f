package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/sessions/storetest"
)

// fileChannel is a channel that takes files up to max bytes.
type fileChannel struct {
	*adapterstest.Recorder
	max   int64
	mu    sync.Mutex
	files []adapters.Outbound
}

func (c *fileChannel) SendFile(_ context.Context, out adapters.Outbound) (adapters.Sent, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files = append(c.files, out)
	return adapters.Sent{MessageID: "f"}, nil
}

func (c *fileChannel) MaxFileBytes() int64 { return c.max }

// A file reply is read from the file store when it is sent, once, in the
// chat's order; one over the channel's limit, one deleted before it went,
// and one to a channel that can't take files are each said in the chat in
// plain words instead.
func TestSenderSendsFilesFromTheStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		clock := storetest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		store := gateway.NewStore(db, clock.Now)
		ss := sessions.NewStore(db)
		fs := files.NewStore(db, files.Limits{}, nil)
		s, _, err := ss.Resolve(ctx, sessions.ChatKey("telegram", "1", "u1", "default"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		for name, size := range map[string]int{"small.csv": 10, "big.pdf": 2000, "gone.txt": 5} {
			if _, err := fs.Put(ctx, s.ID, name, files.TypeByName(name), []byte(strings.Repeat("x", size))); err != nil {
				t.Fatal(err)
			}
		}
		ch := &fileChannel{Recorder: adapterstest.New(), max: 1000}
		sid := string(s.ID)
		if err := store.QueueReplies(ctx, []gateway.Reply{
			{Key: "m1:0", SessionID: sid, Adapter: "tg", ChatID: "1", Text: "Here are your files."},
			{Key: "m1:f0", SessionID: sid, Adapter: "tg", ChatID: "1", Text: "the small one", FileSession: sid, FileName: "small.csv"},
			{Key: "m1:f1", SessionID: sid, Adapter: "tg", ChatID: "1", FileSession: sid, FileName: "big.pdf"},
			{Key: "m1:f2", SessionID: sid, Adapter: "tg", ChatID: "1", FileSession: sid, FileName: "gone.txt"},
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Delete(ctx, s.ID, "gone.txt"); err != nil {
			t.Fatal(err)
		}
		sender := senderFor(store, ch, gateway.SenderOptions{Files: fs})
		if n := sendAll(t, sender); n != 4 {
			t.Fatalf("sent %d, want 4", n)
		}
		if len(ch.files) != 1 || ch.files[0].File.Name != "small.csv" || string(ch.files[0].File.Data) != strings.Repeat("x", 10) ||
			ch.files[0].Text != "the small one" || ch.files[0].File.MediaType != "text/csv" {
			t.Fatalf("files sent %+v, want small.csv with its caption", ch.files)
		}
		texts := ch.Sent()
		if len(texts) != 3 || texts[0].Text != "Here are your files." ||
			texts[1].Text != "I can't send big.pdf here: it is 2.0 KB, and this channel takes files of at most 1.0 KB." ||
			texts[2].Text != "I meant to send you gone.txt, but it was deleted before it could be sent." {
			t.Fatalf("texts sent %+v", texts)
		}
		if n := sendAll(t, sender); n != 0 || len(ch.files) != 1 {
			t.Fatalf("a second pass sent %d more", n)
		}

		// A channel without files says so, with the caption.
		plain := adapterstest.New()
		if err := store.QueueReplies(ctx, []gateway.Reply{{Key: "m2:f0", Adapter: "tg", ChatID: "2", Text: "for you", FileSession: sid, FileName: "small.csv"}}); err != nil {
			t.Fatal(err)
		}
		sendAll(t, senderFor(store, plain, gateway.SenderOptions{Files: fs}))
		if got := plain.Sent(); len(got) != 1 || got[0].Text != "I have small.csv (10 B) for you, but files can't be sent on this channel. for you" {
			t.Fatalf("sent %+v", got)
		}
	})
}
