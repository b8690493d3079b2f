package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/parleyd/parley/permissions"
)

// runView shows in a terminal chat what a run does besides writing its
// reply: a tool's permission question, answered with the next line typed;
// the model being tried again; the conversation being compacted.
type runView struct {
	c       *Client
	session string
	out     io.Writer
	// lines are the lines the person types; closed when input ends.
	lines <-chan string

	mu   sync.Mutex
	open map[string]context.CancelFunc // questions waiting for a line, by request id
	wg   sync.WaitGroup
}

// permissionRequested is the data of a permission.requested event.
type permissionRequested struct {
	RequestID string          `json:"request_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Choices   []string        `json:"choices"`
}

// on handles one event of the run being followed.
func (v *runView) on(ctx context.Context, ev Event) {
	switch ev.Type {
	case "permission.requested":
		var d permissionRequested
		if json.Unmarshal(ev.Data, &d) != nil || d.RequestID == "" {
			return
		}
		v.ask(ctx, d)
	case "permission.resolved":
		var d struct {
			RequestID string `json:"request_id"`
			Answer    string `json:"answer"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			return
		}
		v.mu.Lock()
		cancel, waiting := v.open[d.RequestID]
		delete(v.open, d.RequestID)
		v.mu.Unlock()
		if waiting {
			// Answered elsewhere (the API, another client), timed out or
			// stopped: the line typed next is a message again.
			cancel()
			fmt.Fprintf(v.out, "\n(%s)\n", outcomeText(d.Answer))
		}
	case "status":
		var st struct {
			State   string `json:"state"`
			Attempt int    `json:"attempt"`
			Message string `json:"message"`
		}
		if json.Unmarshal(ev.Data, &st) != nil {
			return
		}
		switch {
		case st.State == "retrying":
			line := "retrying"
			if st.Attempt > 0 {
				line += fmt.Sprintf(", attempt %d", st.Attempt)
			}
			if st.Message != "" {
				line += ": " + st.Message
			}
			fmt.Fprintf(v.out, "\n(%s)\n", line)
		case st.State == "busy" && st.Message != "":
			fmt.Fprintf(v.out, "\n(%s)\n", st.Message)
		}
	case "context.compacted":
		var d struct {
			Summarized int `json:"summarized"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.Summarized > 0 {
			fmt.Fprintf(v.out, "\n(summarized %d earlier messages to make room)\n", d.Summarized)
		}
	}
}

// ask shows a permission question with its choices numbered and waits,
// apart, for the line that answers it.
func (v *runView) ask(ctx context.Context, d permissionRequested) {
	q := permissions.Question{Tool: d.Tool, Arguments: d.Arguments}
	for _, c := range d.Choices {
		q.Choices = append(q.Choices, permissions.Answer(c))
	}
	if len(q.Choices) == 0 {
		return
	}
	qctx, cancel := context.WithCancel(ctx)
	v.mu.Lock()
	if v.open == nil {
		v.open = map[string]context.CancelFunc{}
	}
	if _, asked := v.open[d.RequestID]; asked {
		v.mu.Unlock()
		cancel()
		return
	}
	v.open[d.RequestID] = cancel
	v.mu.Unlock()
	fmt.Fprintf(v.out, "\n%s\n? ", q.Numbered())
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		defer cancel()
		v.answer(qctx, d.RequestID, q)
	}()
}

// answer reads lines until one answers q, and posts it.
func (v *runView) answer(ctx context.Context, id string, q permissions.Question) {
	for {
		var line string
		select {
		case <-ctx.Done():
			return
		case l, ok := <-v.lines:
			if !ok {
				line = string(permissions.Refuse)
				fmt.Fprintln(v.out, "(input ended: denied)")
			} else {
				line = l
			}
		}
		a, ok := parseChoice(line, q.Choices)
		if !ok {
			fmt.Fprintf(v.out, "Answer with a number from 1 to %d.\n? ", len(q.Choices))
			continue
		}
		v.mu.Lock()
		_, still := v.open[id]
		delete(v.open, id)
		v.mu.Unlock()
		if !still {
			return // resolved meanwhile
		}
		var res struct {
			Answer string `json:"answer"`
		}
		err := v.c.Do(ctx, "POST", "/v1/sessions/"+v.session+"/permissions/"+id, map[string]any{"answer": string(a)}, &res)
		if err != nil {
			fmt.Fprintf(v.out, "! could not answer: %v\n", err)
			return
		}
		fmt.Fprintf(v.out, "%s.\n> ", a.Done())
		return
	}
}

// wait ends the questions still waiting (their run is over) and waits for
// their readers.
func (v *runView) wait() {
	v.mu.Lock()
	for id, cancel := range v.open {
		cancel()
		delete(v.open, id)
	}
	v.mu.Unlock()
	v.wg.Wait()
}

// parseChoice reads an answer typed to a numbered question: its number,
// or the choice by name (once, session, always, deny) or label.
func parseChoice(line string, choices []permissions.Answer) (permissions.Answer, bool) {
	s := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(line), "."))
	if n, err := strconv.Atoi(s); err == nil {
		if n >= 1 && n <= len(choices) {
			return choices[n-1], true
		}
		return "", false
	}
	for _, c := range choices {
		if s == string(c) || s == strings.ToLower(c.Label()) {
			return c, true
		}
	}
	return "", false
}

// outcomeText says how a question answered elsewhere ended.
func outcomeText(answer string) string {
	switch answer {
	case "timeout":
		return "no answer in time: not run"
	case "cancelled":
		return "stopped: not run"
	}
	return "answered elsewhere: " + permissions.Answer(answer).Done()
}

// DenyQuestions is a run's event handler for a caller nobody can ask
// (`parley ask`): each permission question is answered deny at once, as
// in process, rather than waiting out its timeout, and note says which.
func (c *Client) DenyQuestions(sessionID string, note io.Writer) func(context.Context, Event) {
	return func(ctx context.Context, ev Event) {
		if ev.Type != "permission.requested" {
			return
		}
		var d permissionRequested
		if json.Unmarshal(ev.Data, &d) != nil || d.RequestID == "" {
			return
		}
		err := c.Do(ctx, "POST", "/v1/sessions/"+sessionID+"/permissions/"+d.RequestID, map[string]any{"answer": string(permissions.Refuse)}, &struct{}{})
		if err != nil {
			fmt.Fprintf(note, "could not deny the question about %s: %v\n", d.Tool, err)
			return
		}
		fmt.Fprintf(note, "not run: %s needs a person's approval, and parley ask has nobody to ask; use parley chat, or allow it in the agent's permissions\n", d.Tool)
	}
}
