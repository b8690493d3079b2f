package openai_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/internal/wiretest"
	"github.com/parleyd/parley/llm/openai"
)

// BenchmarkStream is one call with a 250-message history (a chat 125 turns
// in) against a local server answering at once, through the default
// client: the provider's own cost per turn, the server's included.
func BenchmarkStream(b *testing.B) {
	reply := wiretest.SSE(chunk(map[string]any{"role": "assistant", "content": ""}, nil), text("message 7 from chat 1003"), stop, basicUse, done)
	srv := wiretest.NewLoop(b, reply)
	m := openai.New(openai.Options{APIKey: apiKey, BaseURL: srv.URL + "/v1"})
	req := llm.Request{Model: "gpt-test", System: "You are a helpful assistant."}
	for i := range 125 {
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("message %d from chat 1003", i)},
			llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprintf("message %d from chat 1003", i)})
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: "message 7 from chat 1003"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Stream(context.Background(), req, nil); err != nil {
			b.Fatal(err)
		}
	}
}
