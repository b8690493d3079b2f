// Package client talks to a running parley over its HTTP API: the chat
// of `parley chat --server`, and the requests other commands make.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/parleyd/parley/commands"
)

// Chat talks to an agent on a running daemon through its HTTP API: a
// session of its own, each reply printed as it is written.
func Chat(ctx context.Context, server, token string, stdin io.Reader, stdout io.Writer) error {
	return ChatWith(ctx, &Client{Base: baseURL(server), Token: token}, ChatOptions{}, stdin, stdout)
}

// ChatOptions shape ChatWith.
type ChatOptions struct {
	// Session continues this session; "" opens a new one.
	Session string
	// Interrupts are Ctrl-C: one stops the reply being written; one while
	// nothing runs ends the chat.
	Interrupts <-chan os.Signal
}

func baseURL(server string) string {
	server = strings.TrimRight(server, "/")
	if !strings.HasPrefix(server, "http://") && !strings.HasPrefix(server, "https://") {
		server = "http://" + server
	}
	return server
}

// ChatWith is Chat with a client and options.
func ChatWith(ctx context.Context, c *Client, o ChatOptions, stdin io.Reader, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	session := o.Session
	if session == "" {
		var sess struct {
			ID string `json:"id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": "parley chat"}, &sess); err != nil {
			return fmt.Errorf("open a session on %s: %w", c.Base, err)
		}
		session = sess.ID
	}
	fmt.Fprintf(stdout, "connected to %s (session %s); type a message, /help for the commands, /quit to leave\n", c.Base, session)
	// Lines are read apart, so Ctrl-C is heard while waiting for one.
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		var line string
		select {
		case <-ctx.Done():
			return nil
		case <-o.Interrupts:
			return nil
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			line = l
		}
		text := strings.TrimSpace(line)
		if text == "" {
			continue
		}
		switch strings.ToLower(text) {
		case "/quit", "/exit", "/q":
			return nil
		}
		if _, ok := commands.Parse(text); ok {
			if err := c.command(ctx, apiSession{c, &session, stdout, lines}, text, stdout); err != nil {
				fmt.Fprintf(stdout, "! %v\n", err)
			}
			continue
		}
		var run struct {
			RunID string `json:"run_id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions/"+session+"/messages", map[string]any{"content": text}, &run); err != nil {
			fmt.Fprintf(stdout, "! %v\n", err)
			continue
		}
		fmt.Fprint(stdout, "> ")
		runCtx, stopRun := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-o.Interrupts:
				fmt.Fprintln(stdout, "\n(stopping)")
				if text, err := (apiSession{c: c, id: &session, out: stdout}).Stop(context.WithoutCancel(ctx)); err == nil {
					fmt.Fprintln(stdout, text)
				}
				stopRun()
			case <-runCtx.Done():
			}
		}()
		view := &runView{c: c, session: session, out: stdout, lines: lines}
		_, err := c.FollowWith(runCtx, session, run.RunID, stdout, view.on)
		stopRun()
		view.wait()
		<-watched
		if err != nil && runCtx.Err() == nil {
			fmt.Fprintf(stdout, "\n! %v\n", err)
			continue
		}
		fmt.Fprintln(stdout)
	}
}

// CLISession is the id of user's active session cli:chat with the daemon's
// default agent, the one `parley chat` keeps in process too, opened now
// when there is none.
func (c *Client) CLISession(ctx context.Context, user string) (string, error) {
	find := func() (string, error) {
		var page struct {
			Sessions []struct {
				ID  string `json:"id"`
				Key struct {
					SurfaceID string `json:"surface_id"`
				} `json:"key"`
			} `json:"sessions"`
		}
		if err := c.Do(ctx, "GET", "/v1/sessions?surface=cli&status=active&limit=100&user="+url.QueryEscape(user), nil, &page); err != nil {
			return "", err
		}
		for _, s := range page.Sessions {
			if s.Key.SurfaceID == "chat" {
				return s.ID, nil
			}
		}
		return "", nil
	}
	if id, err := find(); id != "" || err != nil {
		return id, err
	}
	id, err := c.OpenCLISession(ctx, "chat", user, "parley chat")
	if err != nil && strings.Contains(err.Error(), ": 409 ") {
		return find() // another parley chat opened it meanwhile
	}
	return id, err
}

// OpenCLISession opens the session cli:<surfaceID> ("chat", or "run:<time>"
// for `parley ask`) of user, as `parley chat` and `parley ask` do in
// process, and returns its id.
func (c *Client) OpenCLISession(ctx context.Context, surfaceID, user, title string) (string, error) {
	var sess struct {
		ID string `json:"id"`
	}
	err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": title, "surface": "cli", "surface_id": surfaceID, "user": user}, &sess)
	return sess.ID, err
}

// apiSession is where a chat command typed in `parley chat --server` runs:
// one session over the API, through the API's own routes (a command sent as
// a message would be answered to a chat, which over the API is nowhere).
type apiSession struct {
	c  *Client
	id *string
	// out takes a retried message's answer as it is written.
	out io.Writer
	// lines, when set, are the lines typed in the chat: a retried
	// message's permission questions are answered with them.
	lines <-chan string
}

var _ commands.Runtime = apiSession{}

// Command runs the chat command typed as line ("/model openai/gpt-4o") on
// *session (a reset moves *session to the new one) and prints what it
// says.
func (c *Client) Command(ctx context.Context, sessionID *string, line string, out io.Writer) error {
	return c.command(ctx, apiSession{c: c, id: sessionID, out: out}, line, out)
}

func (c *Client) command(ctx context.Context, s apiSession, line string, out io.Writer) error {
	if !strings.HasPrefix(strings.TrimSpace(line), "/") {
		line = "/" + line
	}
	cmd, arg, ok := commands.ParseArg(line)
	if !ok {
		return fmt.Errorf("%s doesn't work over the API", strings.TrimSpace(line))
	}
	text, err := cmd.Do(ctx, s, arg)
	if err != nil {
		return err
	}
	if text == "" {
		return nil
	}
	_, err = fmt.Fprintln(out, text)
	return err
}

func (s apiSession) Status(ctx context.Context) (string, error) {
	base := "/v1/sessions/" + *s.id
	var st struct {
		State   string `json:"state"`
		Message string `json:"message"`
	}
	var ss struct {
		MessageCount int64 `json:"message_count"`
		Rollup       struct {
			TokenCount int64 `json:"token_count"`
		} `json:"rollup"`
	}
	if err := s.c.Do(ctx, "GET", base+"/status", nil, &st); err != nil {
		return "", err
	}
	if err := s.c.Do(ctx, "GET", base, nil, &ss); err != nil {
		return "", err
	}
	text := fmt.Sprintf("session %s: %s; %d messages, ~%d tokens", *s.id, st.State, ss.MessageCount, ss.Rollup.TokenCount)
	if st.Message != "" {
		text += " (" + st.Message + ")"
	}
	return text, nil
}

func (s apiSession) Stop(ctx context.Context) (string, error) {
	var r struct {
		Aborted bool `json:"aborted"`
	}
	if err := s.c.Do(ctx, "POST", "/v1/sessions/"+*s.id+"/abort", nil, &r); err != nil {
		return "", err
	}
	if r.Aborted {
		return "Stopped.", nil
	}
	return "Nothing is running.", nil
}

// Reset moves the session to the new one.
func (s apiSession) Reset(ctx context.Context) (string, error) {
	var r struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	if err := s.c.Do(ctx, "POST", "/v1/agent/reset", map[string]any{"session_id": *s.id}, &r); err != nil {
		return "", err
	}
	*s.id = r.Session.ID
	return "New session " + *s.id + ".", nil
}

func (s apiSession) Compact(ctx context.Context) (string, error) {
	var r struct {
		Compacted  bool   `json:"compacted"`
		Skipped    string `json:"skipped"`
		Summarized int    `json:"summarized"`
	}
	if err := s.c.Do(ctx, "POST", "/v1/sessions/"+*s.id+"/compact", nil, &r); err != nil {
		return "", err
	}
	if r.Compacted {
		return fmt.Sprintf("Summarized %d earlier messages.", r.Summarized), nil
	}
	return "Not compacted: " + r.Skipped, nil
}

// Connect explains where a token goes: not into a terminal that shows it;
// an operator stores a person's token through the route.
func (s apiSession) Connect(context.Context, string) (string, error) {
	return "/connect works in a direct chat on a channel; over the API, " + routeOf("connect"), nil
}

func (s apiSession) Disconnect(context.Context, string) (string, error) {
	return "/disconnect works in a direct chat on a channel; over the API, " + routeOf("disconnect"), nil
}

// Model lists the session's allowed models, or switches it to one.
func (s apiSession) Model(ctx context.Context, name string) (string, error) {
	var m struct {
		Models []string `json:"models"`
		Model  string   `json:"model"`
	}
	if err := s.c.Do(ctx, "GET", "/v1/sessions/"+*s.id+"/models", nil, &m); err != nil {
		return "", err
	}
	if name == "" {
		var b strings.Builder
		b.WriteString("Models for this session:")
		for _, x := range m.Models {
			b.WriteString("\n  " + x)
			if x == m.Model {
				b.WriteString(" (in use)")
			}
		}
		if len(m.Models) > 1 {
			b.WriteString("\nSwitch with /model <name>.")
		}
		return b.String(), nil
	}
	spec := ""
	for _, x := range m.Models {
		if _, short, _ := strings.Cut(x, "/"); strings.EqualFold(x, name) || strings.EqualFold(short, name) {
			spec = x
			break
		}
	}
	if spec == "" {
		return fmt.Sprintf("%q is not a model this agent allows; choose one of: %s. Nothing changed.", name, strings.Join(m.Models, ", ")), nil
	}
	override := spec
	if len(m.Models) > 0 && spec == m.Models[0] {
		override = ""
	}
	if err := s.c.Do(ctx, "PATCH", "/v1/sessions/"+*s.id, map[string]any{"model": override}, &struct{}{}); err != nil {
		return "", err
	}
	return "From your next message on, this session runs on " + spec + ".", nil
}

// Voice shows or sets whether the session's replies are spoken.
func (s apiSession) Voice(ctx context.Context, setting string) (string, error) {
	if setting == "" {
		return "Spoken replies are voice notes, for chats on Telegram and WhatsApp; set them with /voice on or /voice off.", nil
	}
	if err := s.c.Do(ctx, "PATCH", "/v1/sessions/"+*s.id, map[string]any{"metadata": map[string]string{"voice": setting}}, &struct{}{}); err != nil {
		return "", err
	}
	return "Spoken replies are " + setting + " for this session from its next message on.", nil
}

// Think shows or sets the session's reasoning effort.
func (s apiSession) Think(ctx context.Context, level string) (string, error) {
	if level == "" {
		var m struct {
			Effort string `json:"reasoning_effort"`
		}
		if err := s.c.Do(ctx, "GET", "/v1/sessions/"+*s.id+"/models", nil, &m); err != nil {
			return "", err
		}
		if m.Effort == "" {
			m.Effort = "the provider's default"
		}
		return "Thinking: " + m.Effort + ". Set it with /think off, low, medium or high.", nil
	}
	if err := s.c.Do(ctx, "PATCH", "/v1/sessions/"+*s.id, map[string]any{"metadata": map[string]string{"reasoning_effort": level}}, &struct{}{}); err != nil {
		return "", err
	}
	if level == "off" {
		return "Thinking is off from your next message on.", nil
	}
	return "Thinking set to " + level + " from your next message on.", nil
}

// lastUserMessage is the session's latest live message from its person.
func (s apiSession) lastUserMessage(ctx context.Context) (id, content string, err error) {
	var page struct {
		Messages []struct {
			ID        string `json:"id"`
			Role      string `json:"role"`
			Content   string `json:"content"`
			Synthetic bool   `json:"synthetic"`
		} `json:"messages"`
		Next string `json:"next_cursor"`
	}
	path := "/v1/sessions/" + *s.id + "/messages?limit=200"
	for range 1000 {
		page.Next = ""
		page.Messages = nil
		if err := s.c.Do(ctx, "GET", path, nil, &page); err != nil {
			return "", "", err
		}
		for _, m := range page.Messages {
			if m.Role == "user" && !m.Synthetic {
				id, content = m.ID, m.Content
			}
		}
		if page.Next == "" {
			break
		}
		path = "/v1/sessions/" + *s.id + "/messages?limit=200&cursor=" + url.QueryEscape(page.Next)
	}
	return id, content, nil
}

// takeBack hides the session's last exchange and returns its message.
func (s apiSession) takeBack(ctx context.Context) (content string, ok bool, err error) {
	id, content, err := s.lastUserMessage(ctx)
	if err != nil || id == "" {
		return "", false, err
	}
	if err := s.c.Do(ctx, "POST", "/v1/sessions/"+*s.id+"/rewind", map[string]any{"message_id": id, "inclusive": true}, &struct{}{}); err != nil {
		return "", false, err
	}
	return content, true, nil
}

func (s apiSession) Undo(ctx context.Context) (string, error) {
	content, ok, err := s.takeBack(ctx)
	if err != nil || !ok {
		return "Nothing to undo yet.", err
	}
	return fmt.Sprintf("Undone: %q and its answer are out of the conversation (kept in its history).", cut(content, 60)), nil
}

// Retry sends the last message again, in place of its exchange, and
// prints the answer as it is written.
func (s apiSession) Retry(ctx context.Context) (string, error) {
	content, ok, err := s.takeBack(ctx)
	if err != nil || !ok {
		return "Nothing to retry yet.", err
	}
	var run struct {
		RunID string `json:"run_id"`
	}
	if err := s.c.Do(ctx, "POST", "/v1/sessions/"+*s.id+"/messages", map[string]any{"content": content}, &run); err != nil {
		return "", err
	}
	fmt.Fprint(s.out, "> ")
	view := &runView{c: s.c, session: *s.id, out: s.out, lines: s.lines}
	on := view.on
	if s.lines == nil {
		on = nil // nobody to ask: the question waits for the API
	}
	_, err = s.c.FollowWith(ctx, *s.id, run.RunID, s.out, on)
	view.wait()
	if err != nil {
		return "", err
	}
	fmt.Fprintln(s.out)
	return "", nil
}

// cut shortens s to n runes.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// routeOf is the API route of the chat command called name.
func routeOf(name string) string {
	c, _ := commands.Parse("/" + name)
	return c.Route
}

// Client makes requests of one parley's API with one of its tokens.
type Client struct {
	Base  string // the server's URL, e.g. http://127.0.0.1:8080
	Token string // one of its http.tokens
	// HTTP makes the requests; nil means http.DefaultClient. parley acp
	// in process sets one that reaches the daemon's API in memory.
	HTTP *http.Client
}

// Request sends one request; a status of 300 or more is an error that says
// what the server answered.
func (c *Client) Request(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode == http.StatusUnauthorized {
			return nil, errors.New("the server refused the token; pass one of its http.tokens with --token or PARLEY_API_TOKEN")
		}
		return nil, &StatusError{Method: method, Path: path, Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return resp, nil
}

// StatusError is the server's refusal of a request: its status (300 or
// more) and the code and message of its error body.
type StatusError struct {
	Method, Path  string
	Status        int
	Code, Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
}

// Do sends one request and decodes the JSON answer into out.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.Request(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// Stream prints a run's text as it arrives, until the run finishes.
func (c *Client) Stream(ctx context.Context, sessionID, runID string, out io.Writer) error {
	_, err := c.Follow(ctx, sessionID, runID, out)
	return err
}

// Event is one event of a run's stream, as FollowWith hands it on.
type Event struct {
	Type  string          `json:"type"`
	RunID string          `json:"run_id"`
	Data  json.RawMessage `json:"data"`
}

// Follow writes a run's text to out as it arrives, until the run
// finishes, and returns the run's error text ("" when it replied).
func (c *Client) Follow(ctx context.Context, sessionID, runID string, out io.Writer) (failure string, err error) {
	return c.FollowWith(ctx, sessionID, runID, out, nil)
}

// FollowWith is Follow that also hands every other event of the run
// (status, permission questions, compaction, and last turn.finished, with
// whether the turn was aborted) to on, when it is set.
func (c *Client) FollowWith(ctx context.Context, sessionID, runID string, out io.Writer, on func(context.Context, Event)) (failure string, err error) {
	resp, err := c.Request(ctx, "GET", "/v1/sessions/"+sessionID+"/events?run_id="+runID, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	run := runID
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			RunID string `json:"run_id"`
			Data  struct {
				Text   string   `json:"text"`
				Error  string   `json:"error"`
				RunIDs []string `json:"run_ids"`
			} `json:"data"`
		}
		var raw Event
		if json.Unmarshal([]byte(data), &ev) != nil || json.Unmarshal([]byte(data), &raw) != nil {
			continue
		}
		if slices.Contains(ev.Data.RunIDs, runID) {
			// The message is answered together with others, in a run
			// under another's id.
			run = ev.RunID
		}
		if ev.RunID != run {
			continue
		}
		switch ev.Type {
		case "message.delta":
			fmt.Fprint(out, ev.Data.Text)
		case "turn.finished":
			if on != nil {
				on(ctx, raw)
			}
			return ev.Data.Error, nil
		default:
			if on != nil {
				on(ctx, raw)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("the stream ended before the reply finished")
}
