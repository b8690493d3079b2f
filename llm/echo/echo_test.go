package echo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/echo"
)

func req(msgs ...llm.Message) llm.Request { return llm.Request{Messages: msgs} }

func user(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }

func TestDefaultEcho(t *testing.T) {
	tests := []struct {
		name      string
		req       llm.Request
		want      string
		deltas    []string
		wantUsage llm.Usage
	}{
		{"last user message", llm.Request{System: "sys", Messages: []llm.Message{
			user("first"), {Role: llm.RoleAssistant, Content: "ok"}, user("hello there  world"),
		}}, "hello there  world", []string{"hello ", "there  ", "world"},
			llm.Usage{Input: 7, Output: 4}}, // (3+5+2+18)/4, 18/4
		{"one word", req(user("hi")), "hi", []string{"hi"}, llm.Usage{Input: 1, Output: 1}},
		{"no user message", req(), echo.EmptyReply, []string{"(empty ", "message)"}, llm.Usage{Input: 1, Output: 3}},
		{"counts runes", req(user("ééééééééé")), "ééééééééé", []string{"ééééééééé"}, llm.Usage{Input: 2, Output: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var deltas []string
			resp, err := echo.New().Stream(context.Background(), tc.req, func(d llm.Delta) { deltas = append(deltas, d.Text) })
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tc.want || resp.StopReason != llm.StopEnd || resp.Model != echo.Name {
				t.Errorf("resp = %+v", resp)
			}
			if strings.Join(deltas, "|") != strings.Join(tc.deltas, "|") {
				t.Errorf("deltas = %q, want %q", deltas, tc.deltas)
			}
			if resp.Usage != tc.wantUsage {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tc.wantUsage)
			}
		})
	}
}

func TestScriptedToolCallThenText(t *testing.T) {
	m := echo.New().
		Then(llm.Response{ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "memory_write", Arguments: json.RawMessage(`{"text":"x"}`)},
			{ID: "c2", Name: "noop"},
		}}).
		Then(llm.Response{Text: "done now"})

	var started []string
	resp, err := m.Stream(context.Background(), req(user("save it")), func(d llm.Delta) {
		if d.ToolCallStarted != nil {
			started = append(started, d.ToolCallStarted.Name)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != llm.StopToolUse || len(resp.ToolCalls) != 2 || string(resp.ToolCalls[1].Arguments) != "{}" {
		t.Errorf("step 1 = %+v", resp)
	}
	if strings.Join(started, ",") != "memory_write,noop" {
		t.Errorf("started = %v", started)
	}

	resp, err = m.Stream(context.Background(), req(user("save it"), llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "ok"}), nil)
	if err != nil || resp.Text != "done now" || resp.StopReason != llm.StopEnd {
		t.Errorf("step 2 = %+v, %v", resp, err)
	}
	// The queue is drained: back to echoing.
	if resp, _ := m.Stream(context.Background(), req(user("again")), nil); resp.Text != "again" {
		t.Errorf("step 3 = %+v", resp)
	}
	if n := len(m.Requests()); n != 3 {
		t.Errorf("recorded %d requests", n)
	}
}

func TestScriptFunctionAndErrors(t *testing.T) {
	boom := &llm.StatusError{Provider: "echo", StatusCode: 500}
	m := echo.New(echo.WithScript(func(r llm.Request) (llm.Response, error) {
		if r.Model == "fail" {
			return llm.Response{}, boom
		}
		return llm.Response{Text: "model " + r.Model, Usage: llm.Usage{Input: 7, Output: 9}}, nil
	})).ThenError(llm.ErrContextLength)

	if _, err := m.Stream(context.Background(), llm.Request{Model: "x"}, nil); !errors.Is(err, llm.ErrContextLength) {
		t.Errorf("queued error = %v", err)
	}
	resp, err := m.Stream(context.Background(), llm.Request{Model: "x"}, nil)
	if err != nil || resp.Text != "model x" || resp.Model != "x" || resp.Usage != (llm.Usage{Input: 7, Output: 9}) {
		t.Errorf("scripted = %+v, %v", resp, err)
	}
	if _, err := m.Stream(context.Background(), llm.Request{Model: "fail"}, nil); !errors.Is(err, boom) {
		t.Errorf("script error = %v", err)
	}
}

func TestCancelMidStream(t *testing.T) {
	m := echo.New(echo.WithDelay(time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		resp llm.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := m.Stream(ctx, req(user("one two three four")), func(d llm.Delta) {
			if d.Text == "two " {
				cancel()
			}
		})
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("err = %v", r.err)
		}
		if r.resp.Text != "one two " || r.resp.StopReason != llm.StopAborted {
			t.Errorf("partial = %+v", r.resp)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stream did not return after cancel")
	}
}

func TestCancelDuringLongDelay(t *testing.T) {
	m := echo.New(echo.WithDelay(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := m.Stream(ctx, req(user("never")), nil)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a delay ignored ctx")
	}
}

func TestRetryAroundEcho(t *testing.T) {
	m := echo.New().ThenError(&llm.StatusError{Provider: "echo", StatusCode: 529})
	var retried int
	resp, err := llm.WithRetry(m, llm.RetryPolicy{
		OnRetry: func(context.Context, int, error, time.Duration) { retried++ },
		Sleep:   func(context.Context, time.Duration) error { return nil },
	}).Stream(context.Background(), req(user("hi")), nil)
	if err != nil || resp.Text != "hi" || retried != 1 {
		t.Errorf("resp %+v, err %v, retried %d", resp, err, retried)
	}
}

func TestRequestsAreBounded(t *testing.T) {
	const kept = 64
	m := echo.New()
	for i := range kept + 10 {
		if _, err := m.Stream(context.Background(), llm.Request{Model: fmt.Sprint(i),
			Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := m.Requests()
	if len(reqs) != kept || reqs[0].Model != "10" || reqs[len(reqs)-1].Model != fmt.Sprint(kept+9) {
		t.Fatalf("kept %d requests, first %q last %q", len(reqs), reqs[0].Model, reqs[len(reqs)-1].Model)
	}
}

// Forget drops the remembered requests; later ones are remembered again.
func TestForget(t *testing.T) {
	m := echo.New()
	stream := func(model string) {
		t.Helper()
		if _, err := m.Stream(context.Background(), llm.Request{Model: model,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	stream("a")
	stream("b")
	m.Forget()
	if n := len(m.Requests()); n != 0 {
		t.Fatalf("%d requests remembered after Forget", n)
	}
	stream("c")
	if reqs := m.Requests(); len(reqs) != 1 || reqs[0].Model != "c" {
		t.Fatalf("after Forget and one request: %+v", reqs)
	}
}
