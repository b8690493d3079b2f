package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/sessions"
)

// noteDaemon is a daemon, not yet running, with one open Telegram channel
// "tg" that records what it sends.
func noteDaemon(t *testing.T, ctx context.Context) (*Daemon, *config.Config, *adapterstest.Recorder) {
	t.Helper()
	path, _ := writeConfig(t, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg\n    type: telegram\n    token: \"\"\n    dm_policy: open\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := build(ctx, cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	rec := adapterstest.New()
	d.adapters = map[adapters.ID]adapters.Adapter{"tg": rec}
	return d, cfg, rec
}

// A note to a chat with no conversation (a nightly report) is where the
// chat's next conversation starts, so a reply to it finds it.
func TestNoteStartsTheChatsNextConversation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, cfg, rec := noteDaemon(t, ctx)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	note := "The nightly build failed: TestCheckout timed out."
	if err := d.gw.Notify(ctx, "tg:43", note, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.WaitSent(ctx, 1); err != nil {
		t.Fatal(err)
	}
	in := adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "43", UserID: "43", MessageID: "m1",
		Text: "why did it fail?", Time: time.Now()}
	if err := d.gw.Deliver(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.WaitSent(ctx, 2); err != nil {
		t.Fatal(err)
	}
	key := sessions.ChatKey("telegram", "43", "43", cfg.Agents[0].ID)
	s, err := d.sessions.Active(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := d.sessions.Messages(ctx, s.ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[0].Role != sessions.RoleAssistant || msgs[0].Content != note ||
		msgs[1].Role != sessions.RoleUser || !strings.Contains(msgs[1].Content, "why did it fail?") {
		var got []string
		for _, m := range msgs {
			got = append(got, string(m.Role)+": "+m.Content)
		}
		t.Fatalf("the conversation: %q; want the note, the question, the answer", got)
	}
	// The conversation goes on: the note is not added again.
	in.MessageID, in.Text = "m2", "and now?"
	if err := d.gw.Deliver(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.WaitSent(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if msgs, err = d.sessions.Messages(ctx, s.ID, sessions.MessagesOptions{}); err != nil || len(msgs) != 5 {
		t.Fatalf("after a second message: %d messages (%v), want 5", len(msgs), err)
	}
}

// A note and a new session racing: whichever adds it first, the session
// holds it once.
func TestNoteRacingANewSessionIsAddedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, cfg, _ := noteDaemon(t, ctx)
	// The session is created, the note arrives and joins it, and only then
	// does the session's seed run.
	s, created, err := d.sessions.Resolve(ctx, sessions.ChatKey("telegram", "44", "44", cfg.Agents[0].ID), sessions.Policy{})
	if err != nil || !created {
		t.Fatalf("resolve: created %v, %v", created, err)
	}
	if err := d.gw.Notify(ctx, "tg:44", "the deploy finished", "ci"); err != nil {
		t.Fatal(err)
	}
	if added, err := d.gw.SeedNotes(ctx, s, adapters.Inbound{Adapter: "tg", ChatID: "44"}); err != nil || !added {
		t.Fatalf("seed: added %v, %v; want the note (again, once)", added, err)
	}
	msgs, err := d.sessions.Messages(ctx, s.ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Content != "the deploy finished" {
		t.Fatalf("the session holds %d messages (%+v); want the note once", len(msgs), msgs)
	}
}
