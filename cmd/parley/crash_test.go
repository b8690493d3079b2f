package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/sessions"
)

// crashChat is one Telegram chat of the crash test, as its user sees it.
type crashChat struct {
	id       int64
	injected int // messages sent; message k's text is crashText(id, k)
	answered int // distinct replies seen, each the answer to the next message
	// lastLife is the process life the latest reply came in: a repeat of
	// it in the next life is the send a crash cut between the platform
	// call and its record.
	lastLife int
	repeats  int
}

func crashText(chat int64, k int) string { return fmt.Sprintf("message %d of chat %d", k, chat) }

// The built binary is SIGKILLed again and again in the middle of a burst
// of Telegram messages, and restarted: every message is answered once, by
// a reply that answers it (the model echoes it), in order per chat; no
// chat that was waiting is silent for more than 2 s after a restart is
// ready; and the stored history holds one reply per message. A reply whose
// send the crash cut between the platform call and its record may reach
// its chat twice (README, "Crashes"): only that one, once per crash.
func TestCrashesMidBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts parley seven times")
	}
	tg := telegramtest.NewServer()
	defer tg.Close()
	model := llmtest.NewOpenAIEcho(t, 15*time.Millisecond)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "data", "parley.db")
	cfg := "database:\n  url: " + dbPath + "\n" +
		"http:\n  listen: 127.0.0.1:0\n" +
		"gateway:\n  debounce: 0s\n" +
		model.ConfigYAML() +
		"agents:\n  - id: default\n    model: openai/gpt-test\n" +
		"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n" + indentYAML(tg.ConfigYAML(), "    ")
	path := filepath.Join(dir, "parley.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	const (
		nChats = 8
		window = 3 // messages a chat has waiting at most
		kills  = 6
		total  = 40 // messages per chat
	)
	chats := make([]*crashChat, nChats)
	for i := range chats {
		chats[i] = &crashChat{id: int64(2000 + i)}
	}
	byID := map[string]*crashChat{}
	for _, c := range chats {
		byID[strconv.FormatInt(c.id, 10)] = c
	}
	seen := 0 // replies read from the fake so far
	life := 0
	var p *parleyProcess
	// read takes the replies sent since the last read and checks each.
	read := func() {
		t.Helper()
		for _, m := range tg.SentSince(seen) {
			seen++
			c := byID[m.ChatID]
			if c == nil {
				p.fatalf("a reply to chat %s, which sent nothing: %q", m.ChatID, m.Text)
			}
			if c.answered > 0 && m.Text == crashText(c.id, c.answered-1) {
				// The same reply again: only the one a crash cut mid-send,
				// once, in the life after the crash.
				if c.lastLife != life-1 {
					p.fatalf("chat %d got %q twice without a crash between", c.id, m.Text)
				}
				c.lastLife = life
				c.repeats++
				continue
			}
			if want := crashText(c.id, c.answered); m.Text != want {
				p.fatalf("chat %d's reply %d is %q; want %q (an answer to its own message, in order)", c.id, c.answered, m.Text, want)
			}
			c.answered++
			c.lastLife = life
		}
	}
	// inject tops every chat up to window messages waiting.
	inject := func() {
		for _, c := range chats {
			for c.injected-c.answered < window && c.injected < total {
				tg.InjectText(c.id, c.id, crashText(c.id, c.injected))
				c.injected++
			}
		}
	}
	done := func() bool {
		for _, c := range chats {
			if c.answered < total {
				return false
			}
		}
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var worstSilence time.Duration
	for life = 0; ; life++ {
		p = runParley(t, tg, path)
		ready := time.Now()
		// The chats waiting for an answer when the process came up.
		waiting := map[*crashChat]bool{}
		for _, c := range chats {
			if c.injected > c.answered {
				waiting[c] = true
			}
		}
		before := map[*crashChat]int{}
		for _, c := range chats {
			before[c] = c.answered + c.repeats
		}
		// Run this life until it has answered some messages (the kill
		// then falls mid-burst), or, after the last kill, until the end.
		target := seen + 25 + 7*life
		for {
			inject()
			if life < kills && seen >= target || life >= kills && done() {
				break
			}
			waitCtx, cancelWait := context.WithTimeout(ctx, 20*time.Second)
			err := tg.WaitFor(waitCtx, func() bool { return tg.SentCount() > seen })
			cancelWait()
			if err != nil {
				p.fatalf("life %d: no reply for 20 s (%d answered): %v", life, seen, err)
			}
			read()
			for c := range waiting {
				if c.answered+c.repeats > before[c] {
					worstSilence = max(worstSilence, time.Since(ready))
					delete(waiting, c)
				}
			}
		}
		if len(waiting) > 0 {
			worstSilence = max(worstSilence, time.Since(ready))
		}
		if life >= kills {
			break
		}
		p.kill()
		read() // what went out just before the kill
	}
	p.stop(20 * time.Second)
	read()
	repeats := 0
	for _, c := range chats {
		if c.answered != total {
			t.Errorf("chat %d: %d of %d messages answered", c.id, c.answered, total)
		}
		repeats += c.repeats
	}
	t.Logf("%d kills; %d replies; %d sent again after a crash cut their send; the longest a waiting chat was silent after a restart was ready: %s; %d model calls for %d messages",
		kills, seen, repeats, worstSilence, model.Calls.Load(), nChats*total)
	if worstSilence > 2*time.Second {
		t.Errorf("a chat waiting for its answer was silent for %s after a restart was ready; want at most 2s", worstSilence)
	}

	// The stored history: one reply per message, each answering it.
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	db, _, err := daemon.OpenDatabase(ctx, c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := sessions.NewStore(db)
	page, err := store.List(ctx, sessions.ListOptions{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, s := range page.Sessions {
		msgs, err := store.Messages(ctx, s.ID, sessions.MessagesOptions{Archived: true})
		if err != nil {
			t.Fatal(err)
		}
		var roles []string
		for i, m := range msgs {
			roles = append(roles, string(m.Role))
			if m.Role == sessions.RoleAssistant && (i == 0 || msgs[i-1].Role != sessions.RoleUser || msgs[i-1].Content != m.Content) {
				t.Errorf("session %s: message %d, the reply %q, doesn't follow the message it answers (roles %s)", s.ID, i, m.Content, strings.Join(roles, ","))
				break
			}
		}
		checked += len(msgs)
	}
	if checked != 2*nChats*total {
		t.Errorf("the sessions hold %d messages; want %d (a message and its one reply each)", checked, 2*nChats*total)
	}
}
