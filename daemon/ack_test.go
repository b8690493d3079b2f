package daemon

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/llm/llmtest"
)

// ackTelegram runs the daemon with a Telegram bot on the fake Bot API
// whose ack_reaction is emoji, its model a fake OpenAI answering after
// delay.
func ackTelegram(t *testing.T, tg *telegramtest.Server, emoji string, delay time.Duration) func() {
	t.Helper()
	model := llmtest.NewOpenAIEcho(t, delay)
	_, _, stop := testDaemon(t, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+
		"    group_policy: mention\n    groups: {policy: open}\n    ack_reaction: \""+emoji+"\"\n"+indentYAML(tg.ConfigYAML(), "    ")+
		model.ConfigYAML()+"agents:\n  - id: default\n    model: openai/gpt-test\n", configuredChannels(t))
	return stop
}

// reactionsOn are the reaction calls made on one message, each as the
// reactions it left ("" for none).
func reactionsOn(tg *telegramtest.Server, chat string, id int) []string {
	var out []string
	for _, r := range tg.ReactionLog() {
		if r.ChatID == chat && r.MessageID == id {
			out = append(out, strings.Join(r.Emoji, ","))
		}
	}
	return out
}

// With ack_reaction set, each message taken for a turn gets the reaction
// at once, a queued one too while the one before it runs, and loses it
// when it is answered. A message delivered again (deduplicated) is not
// reacted to again; a group message not addressed to the bot gets none.
func TestAckReactionOnTelegram(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	stop := ackTelegram(t, tg, "👀", 1500*time.Millisecond)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wait := func(what string, cond func() bool) {
		t.Helper()
		if err := tg.WaitFor(ctx, cond); err != nil {
			t.Fatalf("%s: %v; reactions %+v, sent %+v", what, err, tg.ReactionLog(), tg.Sent())
		}
	}
	replied := func(chat, text string) func() bool {
		return func() bool {
			return slices.ContainsFunc(tg.Sent(), func(m telegramtest.SentMessage) bool { return m.ChatID == chat && strings.Contains(m.Text, text) })
		}
	}

	first := injectDirect(tg, 42, "first")
	second := injectDirect(tg, 42, "second")
	// Both wear it while the first is answered: the second waits its turn.
	wait("both messages acknowledged", func() bool {
		return slices.Equal(tg.Reactions("42", first), []string{"👀"}) && slices.Equal(tg.Reactions("42", second), []string{"👀"})
	})
	if len(tg.Sent()) != 0 {
		t.Fatalf("a reply came before the reactions: %+v", tg.Sent())
	}
	wait("the first answered", replied("42", "first"))
	wait("the first's reaction taken away", func() bool { return len(tg.Reactions("42", first)) == 0 })
	if !replied("42", "second")() && !slices.Equal(tg.Reactions("42", second), []string{"👀"}) {
		t.Fatalf("the second lost its reaction before its answer: %v", reactionsOn(tg, "42", second))
	}
	wait("the second answered", replied("42", "second"))
	wait("the second's reaction taken away", func() bool { return len(tg.Reactions("42", second)) == 0 })
	for _, id := range []int{first, second} {
		if got := reactionsOn(tg, "42", id); !slices.Equal(got, []string{"👀", ""}) {
			t.Fatalf("reaction calls on message %d: %q, want it put on once and taken away once", id, got)
		}
	}

	// The first message delivered again: dropped as a duplicate, no reaction.
	dup := tg.Inject(telegramtest.Update{Message: &telegramtest.Message{MessageID: first, From: &telegramtest.User{ID: 42, FirstName: "User"},
		Chat: telegramtest.Chat{ID: 42, Type: "private", FirstName: "User"}, Date: time.Now().Unix(), Text: "first"}})
	// In a group: a message to others gets none, one to the bot gets it.
	quiet := tg.NextMessageID("-100")
	tg.Inject(telegramtest.Update{Message: &telegramtest.Message{MessageID: quiet, From: &telegramtest.User{ID: 7, FirstName: "Ann"},
		Chat: telegramtest.Chat{ID: -100, Type: "supergroup", Title: "Group"}, Date: time.Now().Unix(), Text: "just chatting"}})
	mention := "@" + telegramtest.BotUsername + " hello bot"
	addressed := tg.NextMessageID("-100")
	tg.Inject(telegramtest.Update{Message: &telegramtest.Message{MessageID: addressed, From: &telegramtest.User{ID: 7, FirstName: "Ann"},
		Chat: telegramtest.Chat{ID: -100, Type: "supergroup", Title: "Group"}, Date: time.Now().Unix(), Text: mention,
		Entities: []telegramtest.Entity{{Type: "mention", Offset: 0, Length: len(telegramtest.BotUsername) + 1}}}})
	wait("the group's addressed message answered", replied("-100", "hello bot"))
	wait("its reaction taken away", func() bool { return len(reactionsOn(tg, "-100", addressed)) == 2 })
	if got := reactionsOn(tg, "-100", addressed); !slices.Equal(got, []string{"👀", ""}) {
		t.Fatalf("reaction calls on the addressed group message: %q", got)
	}
	if got := reactionsOn(tg, "-100", quiet); len(got) != 0 {
		t.Fatalf("a group message not addressed to the bot got reactions: %q", got)
	}
	wait("the duplicate taken", func() bool { return tg.Confirmed() > dup })
	if got := reactionsOn(tg, "42", first); len(got) != 2 || strings.Count(sentTexts(tg), "first") != 1 {
		t.Fatalf("the duplicate: reactions %q, replies %s", got, sentTexts(tg))
	}
}

// injectDirect queues a message in user's direct chat and returns its id.
func injectDirect(tg *telegramtest.Server, user int64, text string) int {
	id := tg.NextMessageID(strconv.FormatInt(user, 10))
	tg.Inject(telegramtest.Update{Message: &telegramtest.Message{MessageID: id, From: &telegramtest.User{ID: user, FirstName: "User"},
		Chat: telegramtest.Chat{ID: user, Type: "private", FirstName: "User"}, Date: time.Now().Unix(), Text: text}})
	return id
}

func sentTexts(tg *telegramtest.Server) string {
	b, _ := json.Marshal(tg.Sent())
	return string(b)
}

// A reaction Telegram refuses (an emoji not on its list) never fails or
// holds up a turn: the message is answered as without one.
func TestAckReactionRefusedDoesNotFailTheTurn(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	stop := ackTelegram(t, tg, "🦆", 0)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, text := range []string{"one", "two"} {
		tg.InjectText(42, 42, text)
		sent, err := tg.WaitSent(ctx, i+1)
		if err != nil || !strings.Contains(sent[i].Text, text) {
			t.Fatalf("reply %d: %+v %v", i, sent, err)
		}
	}
	if err := tg.WaitFor(ctx, func() bool { return tg.Calls("setMessageReaction") >= 2 }); err != nil {
		t.Fatalf("the reactions were never tried: %v", err)
	}
	if got := tg.ReactionLog(); len(got) != 0 {
		t.Fatalf("reactions accepted: %+v", got)
	}
}
