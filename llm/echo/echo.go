// Package echo is an offline, deterministic llm.Model: the default agent's
// model (model: echo), and a scriptable model for tests.
//
// By default it replies with the text of the last user message, streamed a
// word at a time. Tests script it with Then (a queue of responses, used
// first) or WithScript (called once the queue is empty).
package echo

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyd/parley/internal/sleep"
	"github.com/parleyd/parley/llm"
)

// Name is the model name echo reports when the request names none.
const Name = "echo"

// EmptyReply is the default reply when the last user message has no text.
const EmptyReply = "(empty message)"

// Option configures a Model.
type Option func(*Model)

// WithScript makes fn answer every request the queue does not. A returned
// error is returned from Stream as it is, before anything streams.
func WithScript(fn func(req llm.Request) (llm.Response, error)) Option {
	return func(m *Model) { m.script = fn }
}

// WithDelay waits d before each delta, so a test can cancel mid-stream.
func WithDelay(d time.Duration) Option {
	return func(m *Model) { m.delay = d }
}

// Model is the echo model. It is safe for concurrent use.
type Model struct {
	script func(llm.Request) (llm.Response, error)
	delay  time.Duration

	mu    sync.Mutex
	queue []scripted
	reqs  []llm.Request
}

type scripted struct {
	resp llm.Response
	err  error
}

var _ llm.Model = (*Model)(nil)

// New returns an echo model.
func New(opts ...Option) *Model {
	m := &Model{}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Then queues resp as the answer to the next request not yet answered from
// the queue. Its Text streams in deltas, its ToolCalls are announced, its
// Thinking is returned as it is, and a zero Usage is filled in as for an
// echo.
func (m *Model) Then(resp llm.Response) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue = append(m.queue, scripted{resp: resp})
	return m
}

// ThenError queues err as the answer to the next request.
func (m *Model) ThenError(err error) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue = append(m.queue, scripted{err: err})
	return m
}

// maxRecorded is how many requests Requests remembers.
const maxRecorded = 64

// Requests returns the latest requests Stream has received (up to 64),
// oldest first.
func (m *Model) Requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

// Forget drops the requests Requests remembers: each holds its whole
// prompt, and a daemon answering through echo forgets them when it
// settles after a busy spell.
func (m *Model) Forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = nil
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{StopReason: llm.StopAborted}, fmt.Errorf("echo: %w", err)
	}
	want, err := m.next(req)
	if err != nil {
		return llm.Response{}, err
	}
	if want.Model == "" {
		want.Model = cmp.Or(req.Model, Name)
	}
	if want.StopReason == "" {
		want.StopReason = llm.StopEnd
		if len(want.ToolCalls) > 0 {
			want.StopReason = llm.StopToolUse
		}
	}
	if want.Usage == (llm.Usage{}) {
		want.Usage = llm.Usage{Input: tokens(promptChars(req)), Output: tokens(outputChars(want))}
	}

	emit := func(d llm.Delta) {
		if onDelta != nil {
			onDelta(d)
		}
	}
	got := llm.Response{Model: want.Model, Usage: want.Usage, Thinking: want.Thinking}
	for _, piece := range words(want.Text) {
		if err := m.wait(ctx); err != nil {
			got.StopReason = llm.StopAborted
			return got, fmt.Errorf("echo: %w", err)
		}
		got.Text += piece
		emit(llm.Delta{Text: piece})
	}
	for _, tc := range want.ToolCalls {
		if err := m.wait(ctx); err != nil {
			got.StopReason = llm.StopAborted
			return got, fmt.Errorf("echo: %w", err)
		}
		emit(llm.Delta{ToolCallStarted: &llm.ToolCall{ID: tc.ID, Name: tc.Name}})
		if len(tc.Arguments) == 0 {
			tc.Arguments = []byte("{}")
		}
		got.ToolCalls = append(got.ToolCalls, tc)
	}
	got.StopReason = want.StopReason
	return got, nil
}

// next records req and picks the response: the queue, the script, or an
// echo of the last user message.
func (m *Model) next(req llm.Request) (llm.Response, error) {
	m.mu.Lock()
	// Keep the latest requests only: the daemon shares one echo model for
	// its whole life.
	if len(m.reqs) == maxRecorded {
		m.reqs = append(m.reqs[:0], m.reqs[1:]...)
	}
	m.reqs = append(m.reqs, req)
	var s *scripted
	if len(m.queue) > 0 {
		s = &m.queue[0]
		m.queue = m.queue[1:]
	}
	m.mu.Unlock()
	switch {
	case s != nil:
		return s.resp, s.err
	case m.script != nil:
		return m.script(req)
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if msg := req.Messages[i]; msg.Role == llm.RoleUser {
			return llm.Response{Text: cmp.Or(msg.Content, EmptyReply)}, nil
		}
	}
	return llm.Response{Text: EmptyReply}, nil
}

func (m *Model) wait(ctx context.Context) error {
	if m.delay <= 0 {
		return ctx.Err()
	}
	return sleep.For(ctx, m.delay)
}

// words splits s into deltas of one word each, with the spaces after it,
// so the deltas concatenate back to s.
func words(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexFunc(s, unicode.IsSpace)
		if i < 0 {
			return append(out, s)
		}
		j := i + strings.IndexFunc(s[i:], func(r rune) bool { return !unicode.IsSpace(r) })
		if j < i {
			return append(out, s)
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}

// tokens estimates chars/4, at least 1.
func tokens(chars int) int64 {
	return max(1, int64(chars/4))
}

func promptChars(req llm.Request) int {
	n := utf8.RuneCountInString(req.System)
	for _, msg := range req.Messages {
		n += utf8.RuneCountInString(msg.Content)
		for _, tc := range msg.ToolCalls {
			n += utf8.RuneCountInString(tc.Name) + utf8.RuneCount(tc.Arguments)
		}
	}
	return n
}

func outputChars(resp llm.Response) int {
	n := utf8.RuneCountInString(resp.Text)
	for _, tc := range resp.ToolCalls {
		n += utf8.RuneCountInString(tc.Name) + utf8.RuneCount(tc.Arguments)
	}
	return n
}
