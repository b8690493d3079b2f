package daemon

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/sessions"
)

// Over the fake Telegram Bot API and a fake OpenAI at the wire: /model
// shows the agent's models as buttons and a press switches the chat to
// one, which the next turn runs on; /think high reaches the wire; /undo
// and /retry take back and answer again the last exchange; an edit of the
// latest message is answered again from its new text, one of an older
// message is only noted, one of a message that isn't there changes
// nothing; bad input is answered plainly and changes nothing. Each step
// is checked in the stored history.
func TestTelegramChatControls(t *testing.T) {
	model := llmtest.NewOpenAIEcho(t, 0)
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, stop := runWithTelegram(t, tg, model.ConfigYAML()+
		"agents:\n  - id: default\n    model: openai/gpt-a\n    models: [\"openai/gpt-b\"]\n")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const chat = 42
	var sent int
	// say sends text and returns its message id and the bot's answer.
	say := func(text string) (int, telegramtest.SentMessage) {
		t.Helper()
		id := tg.NextMessageID(strconv.Itoa(chat))
		tg.Inject(telegramtest.Update{Message: &telegramtest.Message{MessageID: id,
			From: &telegramtest.User{ID: chat, FirstName: "Ann"}, Chat: telegramtest.Chat{ID: chat, Type: "private", FirstName: "Ann"},
			Date: time.Now().Unix(), Text: text}})
		return id, answer(ctx, t, tg, &sent, text)
	}
	key := sessions.ChatKey("telegram", strconv.Itoa(chat), strconv.Itoa(chat), "default")
	history := func(hidden bool) []sessions.Message {
		t.Helper()
		s, err := d.sessions.Active(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := d.sessions.Messages(ctx, s.ID, sessions.MessagesOptions{Hidden: hidden})
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	live := func() string {
		var out []string
		for _, m := range history(false) {
			out = append(out, string(m.Role)+":"+m.Content)
		}
		return strings.Join(out, " | ")
	}

	// /model: the allowed models as buttons, the one in use marked.
	modelMsg, menu := say("/model")
	if !strings.Contains(menu.Text, "openai/gpt-a (in use)") || !strings.Contains(menu.Text, "openai/gpt-b") {
		t.Fatalf("/model answered %q", menu.Text)
	}
	var data []string
	for _, row := range tg.Buttons(strconv.Itoa(chat), menu.MessageID) {
		for _, b := range row {
			data = append(data, b.CallbackData)
		}
	}
	if !slices.Contains(data, "cmd:/model openai/gpt-b") || len(data) != 2 {
		t.Fatalf("/model's buttons carry %q", data)
	}
	tg.Press(chat, chat, menu.MessageID, "cmd:/model openai/gpt-b")
	if got := answer(ctx, t, tg, &sent, "the press"); !strings.Contains(got.Text, "runs on openai/gpt-b") {
		t.Fatalf("the press answered %q", got.Text)
	}
	if _, got := say("/think high"); !strings.Contains(got.Text, "Thinking set to high") {
		t.Fatalf("/think high answered %q", got.Text)
	}

	// Bad input: a plain answer, nothing changed.
	for _, bad := range []struct{ text, want string }{
		{"/model gpt-z", "is not a model this agent allows"},
		{"/model openai/gpt-c", "is not a model this agent allows"},
		{"/think extreme", "is not a thinking level"},
	} {
		if _, got := say(bad.text); !strings.Contains(got.Text, bad.want) || !strings.Contains(got.Text, "Nothing changed") {
			t.Fatalf("%s answered %q", bad.text, got.Text)
		}
	}

	// A turn runs on the chosen model and effort; its user message says so.
	one, got := say("hello one")
	if got.Text != "hello one" {
		t.Fatalf("answered %q", got.Text)
	}
	reqs := model.Requests()
	if last := reqs[len(reqs)-1]; last.Model != "gpt-b" || last.ReasoningEffort != "high" || last.LastUser != "hello one" {
		t.Fatalf("the provider saw %+v", last)
	}
	msgs := history(false)
	if ts, ok := agent.TurnOf(msgs[0]); !ok || ts.Model != "openai/gpt-b" || ts.ReasoningEffort != "high" {
		t.Fatalf("the turn's user message records %+v, %v", ts, ok)
	}
	if _, got := say("/status"); !strings.Contains(got.Text, "model openai/gpt-b · thinking high") || !strings.Contains(got.Text, "Last turn ran on openai/gpt-b, thinking high") {
		t.Fatalf("/status answered %q", got.Text)
	}

	// /undo hides the last exchange, keeping it.
	say("hello two")
	if _, got := say("/undo"); !strings.Contains(got.Text, `"hello two"`) {
		t.Fatalf("/undo answered %q", got.Text)
	}
	if got := live(); got != "user:hello one | assistant:hello one" {
		t.Fatalf("live after /undo: %s", got)
	}
	if n := len(history(true)); n != 4 {
		t.Fatalf("%d messages kept after /undo, want 4", n)
	}

	// /retry answers the last message again, the old answer kept hidden.
	calls := len(model.Requests())
	if _, got := say("/retry"); got.Text != "hello one" {
		t.Fatalf("/retry answered %q", got.Text)
	}
	if n := len(model.Requests()); n != calls+1 {
		t.Fatalf("/retry made %d model calls", n-calls)
	}
	if got := live(); got != "user:hello one | assistant:hello one" {
		t.Fatalf("live after /retry: %s", got)
	}
	if n := len(history(true)); n != 6 {
		t.Fatalf("%d messages kept after /retry, want 6", n)
	}

	// An edit of the latest message is answered again from its new text.
	three, _ := say("hello three")
	tg.InjectEdit(chat, chat, three, "hello three, edited")
	if got := answer(ctx, t, tg, &sent, "the edit"); got.Text != "hello three, edited" {
		t.Fatalf("the edit was answered %q", got.Text)
	}
	if got := live(); got != "user:hello one | assistant:hello one | user:hello three, edited | assistant:hello three, edited" {
		t.Fatalf("live after the edit: %s", got)
	}

	// An edit of an older message is stored as an edit and noted, not
	// answered again.
	calls = len(model.Requests())
	before := live()
	tg.InjectEdit(chat, chat, one, "hello one, edited")
	if got := answer(ctx, t, tg, &sent, "an old edit"); !strings.Contains(got.Text, "Noted your edit of an earlier message") {
		t.Fatalf("an edit of an older message was answered %q", got.Text)
	}
	if got := live(); got != before+" | user:(edited an earlier message to:) hello one, edited" {
		t.Fatalf("live after an older edit: %s", got)
	}
	// An edit of a message the conversation doesn't have (a command, or
	// none at all) changes nothing.
	before = live()
	tg.InjectEdit(chat, chat, modelMsg, "/reset")
	if got := answer(ctx, t, tg, &sent, "an edit of a command"); !strings.Contains(got.Text, "can't find the message you edited") {
		t.Fatalf("an edit of a command was answered %q", got.Text)
	}
	tg.InjectEdit(chat, chat, 999999, "what?")
	if got := answer(ctx, t, tg, &sent, "a missing edit"); !strings.Contains(got.Text, "can't find the message you edited") {
		t.Fatalf("an edit of a message that isn't there was answered %q", got.Text)
	}
	if got := live(); got != before {
		t.Fatalf("an edit of a message that isn't there changed the history: %s", got)
	}
	if n := len(model.Requests()); n != calls {
		t.Fatalf("edits that aren't answered made %d model calls", n-calls)
	}
}

// answer waits for the bot's next message and returns it.
func answer(ctx context.Context, t *testing.T, tg *telegramtest.Server, sent *int, what string) telegramtest.SentMessage {
	t.Helper()
	msgs, err := tg.WaitSent(ctx, *sent+1)
	if err != nil {
		t.Fatalf("no answer to %s: %v", what, err)
	}
	*sent++
	return msgs[*sent-1]
}
