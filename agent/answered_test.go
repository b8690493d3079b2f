package agent

import (
	"testing"

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
			m, ok := answerTo(tc.msgs, sessions.MessageID(tc.id))
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
