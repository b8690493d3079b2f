package agent

import (
	"bytes"
	"context"
	"strings"
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

// Images kept with earlier messages go to a vision model again, newest
// first, after the run's own: within the agent's count and byte budget.
func TestStoredImagesWithinTheBudget(t *testing.T) {
	// Formats Go can't decode go as they are: their bytes are their size.
	store := map[string][]byte{"a": bytes.Repeat([]byte("a"), 300), "b": bytes.Repeat([]byte("b"), 300), "c": bytes.Repeat([]byte("c"), 100)}
	m := echo.New()
	e := newEnv(t, m, func(o *Options) {
		o.StoredFile = func(_ context.Context, _ sessions.ID, name string) ([]byte, string, error) {
			return store[name], "image/webp", nil
		}
	})
	s := e.session(sessions.ChatKey("telegram", "1", "1", "a"))
	photo := func(name string) []sessions.Part {
		return []sessions.Part{sessions.FilePart(name+".webp", "image/webp", sessions.FileData{Stored: name}, "")}
	}
	run := func(cfg AgentConfig, in Input) []llm.Message {
		t.Helper()
		if _, err := e.runner.Run(context.Background(), Request{Session: s, Agent: cfg, Inputs: []Input{in}}); err != nil {
			t.Fatal(err)
		}
		reqs := m.Requests()
		var users []llm.Message
		for _, msg := range reqs[len(reqs)-1].Messages {
			if msg.Role == llm.RoleUser {
				users = append(users, msg)
			}
		}
		return users
	}
	vision := AgentConfig{ID: "a", Model: "echo", Vision: true, MaxImages: 10, MaxImageBytes: 450}
	run(vision, Input{Text: "one", Parts: photo("a")})
	run(vision, Input{Text: "two", Parts: photo("b")})
	run(vision, Input{Text: "three", Parts: photo("c")})
	names := func(users []llm.Message) string {
		var out []string
		for _, u := range users {
			var s string
			for _, img := range u.Images {
				s += string(img.Data[:1])
			}
			out = append(out, s)
		}
		return strings.Join(out, ",")
	}
	// 450 bytes: c (100) and b (300), newest first; a (300) no longer fits.
	if got := names(run(vision, Input{Text: "four"})); got != ",b,c," {
		t.Fatalf("images per user message %q, want b and c", got)
	}
	// Two images at most: the run's own counts first.
	two := vision
	two.MaxImages = 2
	own := llm.Image{MediaType: "image/png", Data: []byte("own")}
	if got := names(run(two, Input{Text: "five", Images: []llm.Image{own}})); got != ",,c,,o" {
		t.Fatalf("images per user message %q, want the run's own and c", got)
	}
	// Without vision, or with no byte budget, none again.
	for _, cfg := range []AgentConfig{{ID: "a", Model: "echo", MaxImageBytes: 450}, {ID: "a", Model: "echo", Vision: true}} {
		if got := names(run(cfg, Input{Text: "six"})); strings.Trim(got, ",") != "" {
			t.Fatalf("images per user message %q, want none", got)
		}
	}
}
