package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/turns"
)

// askingAgent is an agent whose memory_search must be asked about.
const askingAgent = "agents:\n  - id: default\n    tools: [memory_search]\n    permissions:\n      - tool: memory_search\n        action: ask\n"

// permDaemon runs the daemon with a Telegram bot on the fake Bot API,
// the cron channel and the API.
func permDaemon(t *testing.T, tg *telegramtest.Server, extra string) (*Daemon, string, func()) {
	t.Helper()
	return testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\nadapters:\n  - id: tg-main\n    type: telegram\n"+
		"    dm_policy: open\n    group_policy: mention\n    groups: {policy: open}\n"+indentYAML(tg.ConfigYAML(), "    ")+extra, func(d *Daemon) map[adapters.ID]adapters.Adapter {
		channels, err := adapters.Build(d.cfg(), adapters.BuildOptions{DB: d.db, Vault: d.vault})
		if err != nil {
			t.Fatal(err)
		}
		channels["cron"] = d.cron
		channels[turns.APIAdapterID] = turns.APIChannel{}
		return channels
	})
}

// searchTurn scripts one turn that calls memory_search, then says text.
func searchTurn(d *Daemon, id, text string) {
	d.offline.Then(llm.Response{ToolCalls: []llm.ToolCall{{ID: id, Name: "memory_search", Arguments: json.RawMessage(`{"query":"plans"}`)}}}).
		Then(llm.Response{Text: text})
}

// questionIn waits for a message in chat with buttons under it, and
// returns its id.
func questionIn(t *testing.T, ctx context.Context, tg *telegramtest.Server, chat string, after int) int {
	t.Helper()
	var id int
	err := tg.WaitFor(ctx, func() bool {
		for _, m := range tg.SentSince(after) {
			if m.ChatID == chat && len(tg.Buttons(chat, m.MessageID)) > 0 {
				id = m.MessageID
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no question with buttons in chat %s: %v; sent %+v", chat, err, tg.SentSince(after))
	}
	return id
}

// replyIn waits for a message in chat containing text.
func replyIn(t *testing.T, ctx context.Context, tg *telegramtest.Server, chat, text string) telegramtest.SentMessage {
	t.Helper()
	var got telegramtest.SentMessage
	err := tg.WaitFor(ctx, func() bool {
		for _, m := range tg.Sent() {
			if m.ChatID == chat && strings.Contains(m.Text, text) {
				got = m
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no %q in chat %s: %v; sent %+v", text, chat, err, tg.Sent())
	}
	return got
}

// dataOf is the callback data of the button labelled label.
func dataOf(t *testing.T, rows [][]telegramtest.Button, label string) string {
	t.Helper()
	for _, row := range rows {
		for _, b := range row {
			if b.Text == label {
				return b.CallbackData
			}
		}
	}
	t.Fatalf("no button %q in %+v", label, rows)
	return ""
}

// toolResults are the tool results the model was given for call id.
func toolResults(d *Daemon, id string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range d.offline.Requests() {
		for _, m := range r.Messages {
			if m.Role == llm.RoleTool && m.ToolCallID == id && !seen[m.Content] {
				seen[m.Content] = true
				out = append(out, m.Content)
			}
		}
	}
	return out
}

// editedText is the latest text of a message.
func editedText(tg *telegramtest.Server, chat string, id int) string {
	text := ""
	for _, e := range tg.Edits() {
		if e.ChatID == chat && e.MessageID == id {
			text = e.Text
		}
	}
	return text
}

// The question appears as buttons; while it waits the session's status
// says so; "Always in this chat" runs the tool and the chat's next call
// runs unasked, while another chat is still asked, and its "Deny" reaches
// the model as a denial, the turn going on.
func TestPermissionButtonsInTelegram(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, _, stop := permDaemon(t, tg, askingAgent)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	searchTurn(d, "c1", "searched once")
	tg.InjectText(42, 42, "what are my plans?")
	q := questionIn(t, ctx, tg, "42", 0)
	rows := tg.Buttons("42", q)
	var labels []string
	for _, row := range rows {
		for _, b := range row {
			labels = append(labels, b.Text)
		}
	}
	if strings.Join(labels, "|") != "Allow once|Always in this chat|Always|Deny" {
		t.Fatalf("buttons %q", labels)
	}
	waiting := false
	for _, st := range d.runner.Statuses().All() {
		waiting = waiting || st.State == agent.StateWaitingForPermission && strings.Contains(st.Message, "memory_search")
	}
	if !waiting {
		t.Fatalf("statuses while asking: %+v", d.runner.Statuses().All())
	}
	if got := toolResults(d, "c1"); len(got) != 0 {
		t.Fatalf("the tool ran before the answer: %q", got)
	}

	tg.Press(42, 42, q, dataOf(t, rows, "Always in this chat"))
	replyIn(t, ctx, tg, "42", "searched once")
	if got := toolResults(d, "c1"); len(got) != 1 || strings.HasPrefix(got[0], "error:") {
		t.Fatalf("tool result after allowing: %q", got)
	}
	if a := tg.CallbackAnswers(); len(a) != 1 || a[0].Text != "Allowed in this chat from now on" {
		t.Fatalf("callback answers %+v", a)
	}
	if tg.Buttons("42", q) != nil || !strings.Contains(editedText(tg, "42", q), "Allowed in this chat from now on") {
		t.Fatalf("the question after its answer: buttons %+v, text %q", tg.Buttons("42", q), editedText(tg, "42", q))
	}

	// The chat's next call runs without a question.
	n := tg.SentCount()
	searchTurn(d, "c2", "searched twice")
	tg.InjectText(42, 42, "and now?")
	replyIn(t, ctx, tg, "42", "searched twice")
	for _, m := range tg.SentSince(n) {
		if len(tg.Buttons(m.ChatID, m.MessageID)) > 0 || strings.Contains(m.Text, "Allow it?") {
			t.Fatalf("asked again in the allowed chat: %+v", m)
		}
	}
	if got := toolResults(d, "c2"); len(got) != 1 || strings.HasPrefix(got[0], "error:") {
		t.Fatalf("tool result in the allowed chat: %q", got)
	}

	// Another chat is still asked; its Deny reaches the model.
	n = tg.SentCount()
	searchTurn(d, "c3", "could not search")
	tg.InjectText(43, 43, "my plans?")
	q3 := questionIn(t, ctx, tg, "43", n)
	tg.Press(43, 43, q3, dataOf(t, tg.Buttons("43", q3), "Deny"))
	replyIn(t, ctx, tg, "43", "could not search")
	if got := toolResults(d, "c3"); len(got) != 1 || !strings.HasPrefix(got[0], "error: permission denied: memory_search") {
		t.Fatalf("tool result after Deny: %q", got)
	}
}

// In a group only the person who addressed the bot may answer: another
// member's press is refused with a note, and changes nothing.
func TestPermissionInAGroupAsksTheAddresser(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, _, stop := permDaemon(t, tg, askingAgent)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	searchTurn(d, "g1", "group searched")
	text := "@" + telegramtest.BotUsername + " what are our plans?"
	tg.Inject(telegramtest.Update{Message: &telegramtest.Message{MessageID: tg.NextMessageID("-1007"),
		From: &telegramtest.User{ID: 7, FirstName: "User"}, Chat: telegramtest.Supergroup(-1007, "Group", false),
		Date: time.Now().Unix(), Text: text, Entities: []telegramtest.Entity{telegramtest.EntityFor("mention", text, "@"+telegramtest.BotUsername)}}})
	q := questionIn(t, ctx, tg, "-1007", 0)
	if m := tg.Sent()[0]; !strings.HasPrefix(m.Text, "User: ") {
		t.Fatalf("the question doesn't say whom it asks: %q", m.Text)
	}
	once := dataOf(t, tg.Buttons("-1007", q), "Allow once")
	tg.Press(-1007, 8, q, once)
	if err := tg.WaitFor(ctx, func() bool { return len(tg.CallbackAnswers()) == 1 }); err != nil {
		t.Fatal(err)
	}
	if a := tg.CallbackAnswers()[0]; a.Text != "Only the person who was asked can answer this." {
		t.Fatalf("another member's press: %+v", a)
	}
	if len(tg.Buttons("-1007", q)) == 0 || len(toolResults(d, "g1")) != 0 {
		t.Fatal("another member's press answered the question")
	}
	tg.Press(-1007, 7, q, once)
	replyIn(t, ctx, tg, "-1007", "group searched")
	if a := tg.CallbackAnswers(); len(a) != 2 || a[1].Text != "Allowed once" {
		t.Fatalf("callback answers %+v", a)
	}
	if !strings.Contains(editedText(tg, "-1007", q), "Allowed once (User)") {
		t.Fatalf("the answered question reads %q", editedText(tg, "-1007", q))
	}
}

// The attacker's reproduction: a "3" typed by the person asked, under a
// question with buttons, is no answer (it would be "Always"): in a group
// it is a message like any other, and the question waits for a press.
func TestTypedNumberDoesNotAnswerAButtonQuestion(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, _, stop := permDaemon(t, tg, askingAgent)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	searchTurn(d, "n1", "group searched")
	text := "@" + telegramtest.BotUsername + " what are our plans?"
	tg.Inject(telegramtest.Update{Message: &telegramtest.Message{MessageID: tg.NextMessageID("-1007"),
		From: &telegramtest.User{ID: 7, FirstName: "User"}, Chat: telegramtest.Supergroup(-1007, "Group", false),
		Date: time.Now().Unix(), Text: text, Entities: []telegramtest.Entity{telegramtest.EntityFor("mention", text, "@"+telegramtest.BotUsername)}}})
	q := questionIn(t, ctx, tg, "-1007", 0)
	tg.Inject(telegramtest.Update{Message: &telegramtest.Message{MessageID: tg.NextMessageID("-1007"),
		From: &telegramtest.User{ID: 7, FirstName: "User"}, Chat: telegramtest.Supergroup(-1007, "Group", false),
		Date: time.Now().Unix(), Text: "3"}})
	tg.Press(-1007, 7, q, dataOf(t, tg.Buttons("-1007", q), "Allow once"))
	replyIn(t, ctx, tg, "-1007", "group searched")
	if a := tg.CallbackAnswers(); len(a) != 1 || a[0].Text != "Allowed once" {
		t.Fatalf("the press after a typed 3 was answered %+v", a)
	}
	var stored int
	if err := d.db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM permission_project_rules`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("%d lasting answers stored (%v), want none", stored, err)
	}
}

// No answer within permissions.ask_timeout denies the call: the model is
// told, the question says it went unanswered, and its buttons go.
func TestPermissionTimeoutDenies(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, _, stop := permDaemon(t, tg, askingAgent+"permissions:\n  ask_timeout: 300ms\n")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	searchTurn(d, "t1", "nobody answered")
	tg.InjectText(42, 42, "plans?")
	q := questionIn(t, ctx, tg, "42", 0)
	replyIn(t, ctx, tg, "42", "nobody answered")
	if got := toolResults(d, "t1"); len(got) != 1 || !strings.Contains(got[0], "nobody answered the request to use it within 300ms") {
		t.Fatalf("tool result after the timeout: %q", got)
	}
	if tg.Buttons("42", q) != nil || !strings.Contains(editedText(tg, "42", q), "No answer within 300ms: not run.") {
		t.Fatalf("the question after the timeout: %+v %q", tg.Buttons("42", q), editedText(tg, "42", q))
	}
	// A late press finds nothing to answer.
	tg.Press(42, 42, q, "perm:gone:once")
	if err := tg.WaitFor(ctx, func() bool { return len(tg.CallbackAnswers()) == 1 }); err != nil {
		t.Fatal(err)
	}
	if a := tg.CallbackAnswers()[0]; a.Text != "This question was already answered, or it expired." {
		t.Fatalf("a late press: %+v", a)
	}
}

// /stop while a question waits ends the wait and the turn: the tool does
// not run, and the question says it was stopped.
func TestPermissionStopCancels(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, _, stop := permDaemon(t, tg, askingAgent)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	searchTurn(d, "s1", "never said")
	tg.InjectText(42, 42, "plans?")
	q := questionIn(t, ctx, tg, "42", 0)
	tg.InjectText(42, 42, "/stop")
	replyIn(t, ctx, tg, "42", "Stopped.")
	if err := tg.WaitFor(ctx, func() bool { return tg.Buttons("42", q) == nil }); err != nil {
		t.Fatalf("buttons stay after /stop: %v", err)
	}
	if text := editedText(tg, "42", q); !strings.Contains(text, "Stopped: not run.") {
		t.Fatalf("the question after /stop reads %q", text)
	}
	for _, r := range toolResults(d, "s1") {
		if r != "aborted" {
			t.Fatalf("tool result after /stop: %q", r)
		}
	}
	for _, m := range tg.Sent() {
		if strings.Contains(m.Text, "never said") {
			t.Fatal("the stopped turn went on to reply")
		}
	}
	if d.desk.Waiting() != 0 {
		t.Fatalf("%d questions still wait", d.desk.Waiting())
	}
	for id, st := range d.runner.Statuses().All() {
		if st.State == agent.StateWaitingForPermission {
			t.Fatalf("session %s still waits: %+v", id, st)
		}
	}
}

// A cron job has nobody to ask: the call its rules would ask about is
// denied, and the receipt says which and why; a job whose allow_tools
// names the tool runs it.
func TestPermissionCronDeniesWithReceipt(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, _, stop := permDaemon(t, tg, askingAgent+"cron:\n  jobs:\n"+
		"    - id: nightly\n      schedule: \"0 3 * * *\"\n      prompt: \"nightly report\"\n"+
		"    - id: trusted\n      schedule: \"0 4 * * *\"\n      prompt: \"trusted report\"\n      allow_tools: [\"memory_*\"]\n")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for _, job := range []struct{ id, call, text string }{{"nightly", "n1", "report without search"}, {"trusted", "t1", "report with search"}} {
		searchTurn(d, job.call, job.text)
		run := runCronNow(t, ctx, d, job.id)
		got := waitRun(t, ctx, d, run)
		results := toolResults(d, job.call)
		if job.id == "nightly" {
			if len(results) != 1 || !strings.HasPrefix(results[0], "error: permission denied: memory_search") {
				t.Fatalf("nightly's tool result: %q", results)
			}
			want := `Not run: memory_search: it needs a person's approval (the agent's config says "memory_search: ask"), ` +
				`and nobody is there to ask in cron job "nightly"; the operator can allow it with cron.jobs[0].allow_tools`
			if got.Status != "ok" || !strings.HasPrefix(got.Result, want) || !strings.HasSuffix(got.Result, job.text) {
				t.Fatalf("nightly's receipt: %s %q", got.Status, got.Result)
			}
			continue
		}
		if len(results) != 1 || strings.HasPrefix(results[0], "error:") {
			t.Fatalf("trusted's tool result: %q", results)
		}
		if got.Status != "ok" || got.Result != job.text {
			t.Fatalf("trusted's receipt: %s %q", got.Status, got.Result)
		}
	}
	if len(tg.Sent()) != 0 {
		t.Fatalf("a cron run asked in a chat: %+v", tg.Sent())
	}
}

// runCronNow fires a job at once, waiting for the scheduler to start.
func runCronNow(t *testing.T, ctx context.Context, d *Daemon, id string) string {
	t.Helper()
	for {
		run, err := d.cron.RunNow(ctx, id)
		if err == nil {
			return run.ID
		}
		select {
		case <-ctx.Done():
			t.Fatalf("RunNow %s: %v", id, err)
		case <-time.After(20 * time.Millisecond): // until the scheduler's Start has run
		}
	}
}

// waitRun waits for a cron run to end and returns its receipt.
func waitRun(t *testing.T, ctx context.Context, d *Daemon, id string) cronReceipt {
	t.Helper()
	for {
		r, err := d.cron.Store().Run(ctx, id)
		if err == nil && r.Status.Finished() {
			return cronReceipt{Status: string(r.Status), Result: r.Result}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("cron run %s did not end: %+v %v", id, r, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type cronReceipt struct{ Status, Result string }
