package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
)

// The state a crash leaves — a run in flight with an orphaned tool call, and
// an unsent reply in the outbox — is finalized on start: the call gets its
// "aborted by restart" result, the message is answered, and each reply goes
// out exactly once, also across a second restart.
func TestCrashRecovery(t *testing.T) {
	ctx := context.Background()
	path, dbPath := writeConfig(t, "gateway:\n  debounce: 0s\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	db, _, err := OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	store := gateway.NewStore(db, nil)
	sess := sessions.NewStore(db)
	in := adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "42", UserID: "7", MessageID: "m1", Text: "look it up", Time: time.Now()}
	inboundID, _, err := store.Accept(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := sess.Resolve(ctx, gateway.SessionKey(in, "default"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []sessions.Message{
		{ID: sessions.MessageID(inboundID), Role: sessions.RoleUser, Content: "look it up"},
		{Role: sessions.RoleAssistant, ToolCalls: []sessions.ToolCall{{ID: "call-1", Name: "search", Arguments: json.RawMessage(`{}`)}}},
	} {
		if _, err := sess.Append(ctx, s.ID, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.QueueReplies(ctx, []gateway.Reply{{Key: "earlier:0", Adapter: "tg", ChatID: "99", Text: "an earlier reply"}}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	start := func(want int, wait time.Duration) *adapterstest.Recorder {
		rec, _ := runDaemonUntil(t, cfg, want, wait)
		return rec
	}

	first := start(2, 20*time.Second)
	var texts []string
	for _, o := range first.Sent() {
		texts = append(texts, o.ChatID+": "+o.Text)
	}
	sort.Strings(texts)
	if len(texts) != 2 || texts[0] != "42: look it up" || texts[1] != "99: an earlier reply" {
		t.Fatalf("after the restart sent %q", texts)
	}

	db, err = dbutil.Open(ctx, dbutil.Options{URL: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := sessions.NewStore(db).Messages(ctx, s.ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var orphanResult *sessions.Message
	for i, m := range msgs {
		if m.Role == sessions.RoleTool && m.ToolCallID == "call-1" {
			orphanResult = &msgs[i]
		}
	}
	if orphanResult == nil || orphanResult.Content != agent.AbortedByRestart {
		t.Fatalf("orphaned tool call not finalized: %+v", msgs)
	}
	asked := 0
	for _, m := range msgs {
		if m.Role == sessions.RoleUser && m.Content == "look it up" {
			asked++
		}
	}
	if asked != 1 {
		t.Fatalf("the re-run stored the user's message %d times", asked)
	}
	un, _ := gateway.NewStore(db, nil).Unfinished(ctx, 10, true)
	db.Close()
	if len(un) != 0 {
		t.Fatalf("%d messages still unanswered", len(un))
	}

	if again := start(1, time.Second); len(again.Sent()) != 0 {
		t.Fatalf("a second restart sent again: %+v", again.Sent())
	}
}

// runDaemonUntil runs the daemon on cfg with a recording "tg" channel until
// want replies went out or wait passed, stops it, and returns the channel
// and the requests its offline model answered.
func runDaemonUntil(t *testing.T, cfg *config.Config, want int, wait time.Duration) (*adapterstest.Recorder, int) {
	t.Helper()
	ctx := context.Background()
	rec := adapterstest.New()
	d, err := build(ctx, cfg, slog.New(slog.DiscardHandler), map[adapters.ID]adapters.Adapter{"tg": rec})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	waitCtx, cancelWait := context.WithTimeout(ctx, wait)
	defer cancelWait()
	_, _ = rec.WaitSent(waitCtx, want) // what was sent is the caller's to check
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d.Close()
	return rec, len(d.offline.Requests())
}

// A crash that fell after a turn stored its reply but before the reply was
// recorded as the message's answer leaves the message unanswered: the next
// start sends the stored reply and doesn't run the turn again, so the
// session holds one reply to it, not two.
func TestRecoveryDoesNotAnswerTwice(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) { testRecoveryDoesNotAnswerTwice(t, engine) })
	}
}

func testRecoveryDoesNotAnswerTwice(t *testing.T, engine string) {
	ctx := context.Background()
	path, _ := writeConfig(t, "gateway:\n  debounce: 0s\n")
	if engine == "postgres" {
		path = filepath.Join(t.TempDir(), "parley.yaml")
		if err := os.WriteFile(path, []byte("database:\n  url: "+dbtest.PostgresURL(t)+"\ngateway:\n  debounce: 0s\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	db, _, err := OpenDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	store := gateway.NewStore(db, nil, gateway.Owner(cfg.Gateway.ReplicaID)) // this replica, in its previous life
	sess := sessions.NewStore(db)
	in := adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "42", UserID: "7", MessageID: "m1", Text: "what's the time?", Time: time.Now()}
	inboundID, _, err := store.Accept(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := sess.Resolve(ctx, gateway.SessionKey(in, "default"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []sessions.Message{
		{ID: sessions.MessageID(inboundID), Role: sessions.RoleUser, Content: in.Text},
		{Role: sessions.RoleAssistant, Content: "It is noon."},
	} {
		if _, err := sess.Append(ctx, s.ID, m); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	rec, modelCalls := runDaemonUntil(t, cfg, 1, 20*time.Second)
	if sent := rec.Sent(); len(sent) != 1 || sent[0].Text != "It is noon." || sent[0].ChatID != "42" {
		t.Fatalf("after the restart sent %+v; want the stored reply, once", sent)
	}
	if modelCalls != 0 {
		t.Fatalf("the model was asked %d times for a message already answered", modelCalls)
	}
	db, err = dbutil.Open(ctx, dbutil.Options{URL: cfg.Database.URL.Reveal()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	msgs, err := sessions.NewStore(db).Messages(ctx, s.ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 {
		t.Fatalf("the session holds %d messages; want the message and its one reply", len(msgs))
	}
	if un, _ := gateway.NewStore(db, nil).Unfinished(ctx, 10, true); len(un) != 0 {
		t.Fatalf("%d messages still unanswered", len(un))
	}
}
