package agent

import (
	"context"
	"testing"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
)

// A run's images reach the model with their own message, that run only;
// the stored message keeps the text.
func TestImagesGoWithTheirMessage(t *testing.T) {
	m := echo.New()
	e := newEnv(t, m)
	s := e.session(sessions.ChatKey("telegram", "1", "1", "a"))
	img := llm.Image{MediaType: "image/png", Data: []byte("png bytes")}
	_, err := e.runner.Run(context.Background(), Request{Session: s, Agent: AgentConfig{ID: "a", Model: "echo"},
		Inputs: []Input{{Text: "first"}, {Text: "what is this? [photo]", Images: []llm.Image{img}}}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := m.Requests()
	msgs := reqs[len(reqs)-1].Messages
	var users []llm.Message
	for _, msg := range msgs {
		if msg.Role == llm.RoleUser {
			users = append(users, msg)
		}
	}
	if len(users) != 2 || len(users[0].Images) != 0 || len(users[1].Images) != 1 || string(users[1].Images[0].Data) != "png bytes" {
		t.Fatalf("user messages sent: %+v", users)
	}
	// The next run doesn't send the image again.
	if _, err := e.runner.Run(context.Background(), Request{Session: s, Agent: AgentConfig{ID: "a", Model: "echo"},
		Inputs: []Input{{Text: "and now?"}}}); err != nil {
		t.Fatal(err)
	}
	reqs = m.Requests()
	for _, msg := range reqs[len(reqs)-1].Messages {
		if len(msg.Images) > 0 {
			t.Fatalf("a later run resent an image: %+v", msg)
		}
	}
}
