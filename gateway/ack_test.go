package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/internal/syncbuf"
)

// reacting is the rig's recorder that also reacts, recording each call,
// or refusing each with refuse.
type reacting struct {
	*adapterstest.Recorder
	mu     sync.Mutex
	calls  []string // "+<message>" put on, "-<message>" taken away
	refuse error
}

func (r *reacting) React(_ context.Context, chatID, messageID, emoji string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "+"+messageID+emoji)
	return r.refuse
}

func (r *reacting) Unreact(_ context.Context, chatID, messageID, emoji string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "-"+messageID+emoji)
	return nil
}

func (r *reacting) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

type reactingChannels struct{ r *reacting }

func (c reactingChannels) Adapter(id adapters.ID) (adapters.Adapter, bool) { return c.r, id == "tg" }
func (reactingChannels) Streams(adapters.ID) bool                          { return false }

// ackRig is a rig whose channel tg reacts with 👀; holds says whether
// this replica runs it.
func ackRig(t *testing.T, refuse error, holds bool) (*rig, *reacting, *syncbuf.Buffer) {
	t.Helper()
	r := &reacting{refuse: refuse}
	logs := &syncbuf.Buffer{}
	db := dbtest.SQLite(t)
	rg := newRig(t, db, echoRun, func(o *gateway.Options) {
		r.Recorder = adapterstest.New()
		o.Channels = reactingChannels{r}
		o.Access = map[adapters.ID]gateway.Access{"tg": {DM: gateway.DMOpen, AckReaction: "👀"}}
		o.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if !holds {
			o.Store = gateway.NewStore(db, nil, gateway.ClaimChannels(func() (held, own []string) { return []string{"tg-other"}, nil }))
		}
	})
	return rg, r, logs
}

// A reaction the platform refuses is logged once, as a warning, and every
// message is answered as without it.
func TestAckRefusedIsLoggedOnceAndIgnored(t *testing.T) {
	rg, r, logs := ackRig(t, errors.New("REACTION_INVALID"), true)
	for i := range 3 {
		rg.deliver(msg(fmt.Sprint("m", i), fmt.Sprint("hello ", i)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(r.Calls()) < 3 || len(rg.rec.Sent()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("calls %q, sent %d", r.Calls(), len(rg.rec.Sent()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"ack reaction refused"); n != 1 {
		t.Fatalf("%d warnings of the refusal, want 1:\n%s", n, logs.String())
	}
	for _, c := range r.Calls() {
		if strings.HasPrefix(c, "-") {
			t.Fatalf("a refused reaction was taken away: %q", r.Calls())
		}
	}
}

// A replica that doesn't run the channel puts no reaction on its messages
// (the one running it does), though it runs their turns.
func TestAckOnlyByTheChannelsHolder(t *testing.T) {
	rg, r, _ := ackRig(t, nil, false)
	rg.deliver(msg("m1", "hello"))
	if got := rg.sent(1); len(got) != 1 {
		t.Fatalf("sent %q", got)
	}
	if calls := r.Calls(); len(calls) != 0 {
		t.Fatalf("reaction calls on a replica not running the channel: %q", calls)
	}
}

// A command is answered at once, with no reaction; a message taken for a
// turn gets one, taken away with its answer.
func TestAckSkipsCommands(t *testing.T) {
	rg, r, _ := ackRig(t, nil, true)
	rg.deliver(msg("c1", "/help"))
	rg.deliver(msg("m1", "hello"))
	rg.sent(2)
	deadline := time.Now().Add(10 * time.Second)
	for len(r.Calls()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("calls %q", r.Calls())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := strings.Join(r.Calls(), " "); got != "+m1👀 -m1👀" {
		t.Fatalf("reaction calls %s", got)
	}
}
