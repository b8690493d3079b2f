package agent

import (
	"context"
	"testing"

	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
)

func TestAnswerTo(t *testing.T) {
	user := func(id, text string) sessions.Message {
		return sessions.Message{ID: sessions.MessageID(id), Role: sessions.RoleUser, Content: text}
	}
	asst := func(text string, calls ...string) sessions.Message {
		m := sessions.Message{Role: sessions.RoleAssistant, Content: text}
		for _, c := range calls {
			m.ToolCalls = append(m.ToolCalls, sessions.ToolCall{ID: c, Name: "t"})
		}
		return m
	}
	tool := sessions.Message{Role: sessions.RoleTool, ToolCallID: "c1", Content: "result"}
	side := sessions.Message{Role: sessions.RoleAssistant, Content: "saved", Synthetic: true,
		Parts: []sessions.Part{{Type: PartSideTurn, Name: "memory_flush"}}}
	warning := sessions.Message{Role: sessions.RoleUser, Content: "you repeat yourself", Synthetic: true}
	cases := []struct {
		name   string
		msgs   []sessions.Message
		id     string
		reply  string
		answer bool
	}{
		{"not stored", []sessions.Message{user("a", "A"), asst("A")}, "x", "", false},
		{"no reply yet", []sessions.Message{user("a", "A")}, "a", "", false},
		{"answered", []sessions.Message{user("a", "A"), asst("A!"), user("b", "B")}, "a", "A!", true},
		{"mid tools", []sessions.Message{user("a", "A"), asst("", "c1"), tool}, "a", "", false},
		{"after tools", []sessions.Message{user("a", "A"), asst("", "c1"), tool, warning, asst("done")}, "a", "done", true},
		{"side turn is not the answer", []sessions.Message{user("a", "A"), side}, "a", "", false},
		{"a later message took the reply", []sessions.Message{user("a", "A"), user("b", "B"), asst("AB")}, "a", "", true},
		{"the batch's last gets it", []sessions.Message{user("a", "A"), user("b", "B"), asst("AB")}, "b", "AB", true},
		{"the next turn's reply is not this one's", []sessions.Message{user("a", "A"), user("b", "B")}, "a", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := answerTo(tc.msgs, sessions.MessageID(tc.id), false)
			reply := ""
			if m != nil {
				reply = m.Content
			}
			if reply != tc.reply || ok != tc.answer {
				t.Fatalf("answerTo = %q, %v; want %q, %v", reply, ok, tc.reply, tc.answer)
			}
		})
	}
}

// A run tried again after a database fault ends with its turn's reply,
// though a steered message came between its input and the reply.
func TestAnswerToThroughSteeredMessages(t *testing.T) {
	msgs := []sessions.Message{
		{ID: "a", Role: sessions.RoleUser, Content: "A"},
		{ID: "b", Role: sessions.RoleUser, Content: "B"},
		{Role: sessions.RoleAssistant, Content: "AB"},
	}
	if m, ok := answerTo(msgs, "a", true); !ok || m == nil || m.Content != "AB" {
		t.Fatalf("answerTo through later = %v, %v; want the turn's reply", m, ok)
	}
	if m, ok := answerTo(msgs, "a", false); !ok || m != nil {
		t.Fatalf("answerTo = %v, %v; want answered by a later message", m, ok)
	}
}

// A reply names the messages it answers: a later turn's reply to a newer
// message never answers an earlier one whose turn was cut short (a
// replica died under it, and the newer message ran first elsewhere).
func TestAnswerToNamedReplies(t *testing.T) {
	user := func(id string) sessions.Message {
		return sessions.Message{ID: sessions.MessageID(id), Role: sessions.RoleUser, Content: id}
	}
	reply := func(text string, answers string) sessions.Message {
		return sessions.Message{Role: sessions.RoleAssistant, Content: text, Parts: []sessions.Part{{Type: PartAnswers, Name: answers}}}
	}
	callTool := sessions.Message{Role: sessions.RoleAssistant, ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "t"}}}
	tool := sessions.Message{Role: sessions.RoleTool, ToolCallID: "c1", Content: "aborted by restart"}
	cases := []struct {
		name   string
		msgs   []sessions.Message
		id     string
		reply  string
		answer bool
	}{
		{"a newer message's turn is not this one's", []sessions.Message{user("a"), user("b"), reply("B", "b")}, "a", "", false},
		{"nor after tools cut short", []sessions.Message{user("a"), callTool, tool, user("b"), reply("B", "b")}, "a", "", false},
		{"its own reply after a newer one's", []sessions.Message{user("a"), user("b"), reply("B", "b"), reply("A", "a")}, "a", "A", true},
		{"the newer one has its own", []sessions.Message{user("a"), user("b"), reply("B", "b")}, "b", "B", true},
		{"a batch's earlier message", []sessions.Message{user("a"), user("b"), reply("AB", "a b")}, "a", "", true},
		{"a batch's last message", []sessions.Message{user("a"), user("b"), reply("AB", "a b")}, "b", "AB", true},
		{"steered in after tools", []sessions.Message{user("a"), callTool, tool, user("b"), reply("AB", "a b")}, "a", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := answerTo(tc.msgs, sessions.MessageID(tc.id), false)
			got := ""
			if m != nil {
				got = m.Content
			}
			if got != tc.reply || ok != tc.answer {
				t.Fatalf("answerTo = %q, %v; want %q, %v", got, ok, tc.reply, tc.answer)
			}
		})
	}
}

// Through a real turn and store: a message whose turn was cut short
// before its reply is not answered by the next turn's reply to a newer
// message; that turn's reply answers the newer message only.
func TestAnsweredIsAReplyStoredForThatMessage(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, echo.New())
	sess := e.cliSession()
	// The cut-short turn stored its input and nothing more.
	if _, err := e.store.Append(ctx, sess.ID, sessions.Message{ID: "0197a000-0000-7000-8000-00000000000a", Role: sessions.RoleUser, Content: "first"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.run(Request{Session: sess, Inputs: []Input{{ID: "0197a000-0000-7000-8000-00000000000b", Text: "second"}}}); err != nil {
		t.Fatal(err)
	}
	if reply, ok, err := e.runner.Answered(ctx, sess.ID, "0197a000-0000-7000-8000-00000000000a"); err != nil || ok {
		t.Fatalf("Answered(first) = %q, %v, %v; want not answered: the reply was stored for the second message", reply, ok, err)
	}
	if reply, ok, err := e.runner.Answered(ctx, sess.ID, "0197a000-0000-7000-8000-00000000000b"); err != nil || !ok || reply != "second" {
		t.Fatalf("Answered(second) = %q, %v, %v; want its echo", reply, ok, err)
	}
}
