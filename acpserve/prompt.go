package acpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/permissions"
)

// abortTimeout bounds the abort a session/cancel sends.
const abortTimeout = 10 * time.Second

// promptRun is one session/prompt while it runs.
type promptRun struct {
	// cancelled is set by session/cancel (or session/close): the turn is
	// being stopped, and the prompt answers stopReason cancelled.
	cancelled atomic.Bool
}

func itoa(n int) string { return strconv.Itoa(n) }

// promptText is the prompt's blocks as the one message parley takes: text
// blocks as they are, resource links as their name and URI. Anything else
// is refused, saying which block.
func promptText(blocks []acp.ContentBlock) (string, error) {
	if len(blocks) == 0 {
		return "", invalid("prompt is empty; send at least one text block")
	}
	var b strings.Builder
	for i, c := range blocks {
		var part string
		switch {
		case c.Text != nil:
			part = c.Text.Text
		case c.ResourceLink != nil:
			part = fmt.Sprintf("[%s](%s)", c.ResourceLink.Name, c.ResourceLink.Uri)
		case c.Image != nil:
			return "", invalid("prompt[%d] is an image; parley takes text over ACP (its promptCapabilities have no image): send text blocks", i)
		case c.Audio != nil:
			return "", invalid("prompt[%d] is audio; parley takes text over ACP (its promptCapabilities have no audio): send text blocks", i)
		case c.Resource != nil:
			return "", invalid("prompt[%d] is an embedded resource; parley takes text over ACP (its promptCapabilities have no embeddedContext): paste the text, or send a resource_link", i)
		default:
			return "", invalid("prompt[%d] is a content block parley doesn't know; send text blocks", i)
		}
		if b.Len() > 0 && part != "" {
			b.WriteString("\n\n")
		}
		b.WriteString(part)
	}
	text := b.String()
	switch {
	case !utf8.ValidString(text) || strings.IndexByte(text, 0) >= 0:
		return "", invalid("the prompt's text is not valid UTF-8 or holds a NUL byte; send UTF-8 text")
	case strings.TrimSpace(text) == "":
		return "", invalid("the prompt has no text; send a text block with the message")
	}
	return text, nil
}

// Prompt sends the prompt to the session as one message and streams its
// turn: the reply's text as agent_message_chunk updates, its tool calls as
// tool_call and tool_call_update, and each permission question as a
// session/request_permission whose answer goes back to parley. It answers
// end_turn when the turn is over, cancelled after session/cancel.
func (a *agent) Prompt(_ context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	id := string(p.SessionId)
	text, err := promptText(p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	run := &promptRun{}
	a.mu.Lock()
	s, ok := a.sessions[id]
	if !ok {
		a.mu.Unlock()
		return acp.PromptResponse{}, a.notOpen(id)
	}
	if s.run != nil {
		a.mu.Unlock()
		return acp.PromptResponse{}, invalid("a prompt already runs in session %q; wait for its answer, or stop it with session/cancel", id)
	}
	if a.closed {
		a.mu.Unlock()
		return acp.PromptResponse{}, failed("parley acp is stopping and takes no more prompts")
	}
	s.run = run
	a.wg.Add(1)
	a.mu.Unlock()
	defer a.wg.Done()
	defer func() {
		a.mu.Lock()
		if s.run == run {
			s.run = nil
		}
		a.mu.Unlock()
	}()

	// The request's context ends when the SDK sees another prompt for
	// the session; the turn is followed on the connection's life instead.
	ctx := a.life
	var accepted struct {
		RunID string `json:"run_id"`
	}
	path := "/v1/sessions/" + url.PathEscape(id)
	if err := a.call(ctx, "POST", path+"/messages?if_idle=true", map[string]any{"content": text}, &accepted); err != nil {
		return acp.PromptResponse{}, a.apiError(ctx, "take the prompt", err)
	}
	f := &follower{a: a, session: id, run: run, calls: map[string][]string{}, asks: map[string]context.CancelFunc{}}
	failure, err := a.c.FollowWith(ctx, id, accepted.RunID, chunkWriter{f}, f.on)
	f.end()
	switch {
	case run.cancelled.Load(), f.aborted.Load():
		// Cancelled here, or the turn was stopped elsewhere (/stop in
		// a chat, the API's abort).
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case err != nil && ctx.Err() != nil:
		return acp.PromptResponse{}, failed("parley acp is stopping; the turn goes on in parley, and session/load shows its reply")
	case err != nil:
		a.o.Log.WarnContext(ctx, "acp turn stream broke off", "session_id", id, "error", err)
		return acp.PromptResponse{}, failed("the turn's events broke off (%v); the turn goes on in parley: session/load shows its reply", err)
	case failure != "":
		return acp.PromptResponse{}, failed("the turn failed: %s", failure)
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// Cancel stops the session's running prompt: parley aborts its turn, and
// the prompt answers stopReason cancelled. A cancel with nothing running
// changes nothing.
func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error {
	id := string(p.SessionId)
	a.mu.Lock()
	var run *promptRun
	if s, ok := a.sessions[id]; ok {
		run = s.run
	}
	a.mu.Unlock()
	if run == nil {
		a.o.Log.DebugContext(ctx, "acp cancel with no prompt running", "session_id", id)
		return nil
	}
	a.cancel(ctx, id, run)
	return nil
}

// cancel marks run cancelled and aborts the session's turn. A turn not
// started yet (its message waits out the debounce) is aborted again when
// it starts (follower.on).
func (a *agent) cancel(ctx context.Context, id string, run *promptRun) {
	run.cancelled.Store(true)
	a.abort(ctx, id)
}

// abort asks parley to stop the session's turn.
func (a *agent) abort(ctx context.Context, id string) {
	// Sent even when the request that asked for it has ended.
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer stop()
	var res struct {
		Aborted bool `json:"aborted"`
	}
	if err := a.call(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/abort", nil, &res); err != nil {
		a.o.Log.WarnContext(ctx, "acp abort failed", "session_id", id, "error", err)
	}
}

// follower turns one run's events into session/update notifications and
// permission requests.
type follower struct {
	a       *agent
	session string
	run     *promptRun

	mu sync.Mutex
	// calls are the tool calls started and not yet completed, by tool
	// name, so a permission question (which names the tool, not the
	// call) is shown on its call.
	calls map[string][]string
	// asks are the permission questions waiting for the client, by
	// request id.
	asks map[string]context.CancelFunc
	wg   sync.WaitGroup
	// aborted: the run's turn.finished said it was aborted.
	aborted atomic.Bool
}

// update sends one session/update.
func (f *follower) update(u acp.SessionUpdate) {
	err := f.a.conn.SessionUpdate(f.a.life, acp.SessionNotification{SessionId: acp.SessionId(f.session), Update: u})
	if err != nil {
		f.a.o.Log.DebugContext(f.a.life, "acp update not sent", "session_id", f.session, "error", err)
	}
}

// chunkWriter is the reply's text as it is written: each piece an
// agent_message_chunk.
type chunkWriter struct{ f *follower }

func (w chunkWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.f.update(acp.UpdateAgentMessageText(string(p)))
	}
	return len(p), nil
}

// toolEvent is the data of tool.started and tool.completed.
type toolEvent struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	State  string `json:"state"`
	Result string `json:"result"`
}

// on handles the run's events other than its text and its end.
func (f *follower) on(ctx context.Context, ev client.Event) {
	switch ev.Type {
	case "turn.finished":
		var d struct {
			Aborted bool `json:"aborted"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.Aborted {
			f.aborted.Store(true)
		}
	case "turn.started":
		if f.run.cancelled.Load() {
			f.a.abort(ctx, f.session) // cancelled before it started
		}
	case "tool.started":
		var d toolEvent
		if json.Unmarshal(ev.Data, &d) != nil || d.CallID == "" {
			return
		}
		f.mu.Lock()
		f.calls[d.Name] = append(f.calls[d.Name], d.CallID)
		f.mu.Unlock()
		f.update(acp.StartToolCall(acp.ToolCallId(d.CallID), d.Name, acp.WithStartKind(acp.ToolKindOther),
			acp.WithStartStatus(acp.ToolCallStatusInProgress)))
	case "tool.completed":
		var d toolEvent
		if json.Unmarshal(ev.Data, &d) != nil || d.CallID == "" {
			return
		}
		f.mu.Lock()
		f.calls[d.Name] = slices.DeleteFunc(f.calls[d.Name], func(id string) bool { return id == d.CallID })
		f.mu.Unlock()
		status := acp.ToolCallStatusCompleted
		if d.State == "output-error" {
			status = acp.ToolCallStatusFailed
		}
		f.update(acp.UpdateToolCall(acp.ToolCallId(d.CallID), acp.WithUpdateStatus(status),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(d.Result))})))
	case "permission.requested":
		var d struct {
			RequestID string          `json:"request_id"`
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
			Choices   []string        `json:"choices"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.RequestID == "" {
			return
		}
		f.mu.Lock()
		if _, asked := f.asks[d.RequestID]; asked {
			f.mu.Unlock()
			return
		}
		call := "permission-" + d.RequestID
		if open := f.calls[d.Tool]; len(open) > 0 {
			call = open[0]
		}
		qctx, cancel := context.WithCancel(f.a.life)
		f.asks[d.RequestID] = cancel
		f.wg.Add(1)
		f.mu.Unlock()
		go func() {
			defer f.wg.Done()
			defer cancel()
			f.ask(qctx, call, d.RequestID, d.Tool, d.Arguments, d.Choices)
		}()
	case "permission.resolved":
		var d struct {
			RequestID string `json:"request_id"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			return
		}
		f.mu.Lock()
		cancel := f.asks[d.RequestID]
		delete(f.asks, d.RequestID)
		f.mu.Unlock()
		if cancel != nil {
			cancel() // answered (here or elsewhere), timed out or stopped
		}
	}
}

// ask puts one permission question to the client and posts its answer:
// the option chosen, or deny when the client cancelled or failed.
func (f *follower) ask(ctx context.Context, call, requestID, tool string, args json.RawMessage, choices []string) {
	var opts []acp.PermissionOption
	for _, c := range choices {
		a := permissions.Answer(c)
		kind := acp.PermissionOptionKindAllowOnce
		switch a {
		case permissions.AllowSession, permissions.AllowAlways:
			kind = acp.PermissionOptionKindAllowAlways
		case permissions.Refuse:
			kind = acp.PermissionOptionKindRejectOnce
		}
		opts = append(opts, acp.PermissionOption{Kind: kind, Name: a.Label(), OptionId: acp.PermissionOptionId(c)})
	}
	if len(opts) == 0 {
		return
	}
	title := tool
	resp, err := f.a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: acp.SessionId(f.session),
		ToolCall: acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(call), Title: &title, Kind: acp.Ptr(acp.ToolKindOther),
			Status: acp.Ptr(acp.ToolCallStatusPending), RawInput: rawJSON(args)},
		Options: opts,
	})
	if ctx.Err() != nil {
		return // resolved meanwhile, or the turn is over
	}
	answer := string(permissions.Refuse)
	switch {
	case err != nil:
		f.a.o.Log.WarnContext(ctx, "acp permission request failed; denied", "session_id", f.session, "tool", tool, "error", err)
	case resp.Outcome.Selected != nil && slices.Contains(choices, string(resp.Outcome.Selected.OptionId)):
		answer = string(resp.Outcome.Selected.OptionId)
	case resp.Outcome.Selected != nil:
		f.a.o.Log.WarnContext(ctx, "acp permission answered with an option not offered; denied", "session_id", f.session, "tool", tool)
	}
	err = f.a.call(ctx, "POST", "/v1/sessions/"+url.PathEscape(f.session)+"/permissions/"+url.PathEscape(requestID),
		map[string]any{"answer": answer}, &struct{}{})
	var se *client.StatusError
	if err != nil && !(errors.As(err, &se) && se.Status == 404) && ctx.Err() == nil {
		f.a.o.Log.WarnContext(ctx, "acp permission answer not taken", "session_id", f.session, "tool", tool, "error", err)
	}
}

// end stops the questions still waiting (their turn is over) and waits
// for them.
func (f *follower) end() {
	f.mu.Lock()
	for id, cancel := range f.asks {
		cancel()
		delete(f.asks, id)
	}
	f.mu.Unlock()
	f.wg.Wait()
}
