package permissions

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Place is where a question was asked: a channel and a chat. A numbered
// reply there answers the oldest question waiting in it.
type Place struct {
	Adapter string
	Chat    string
}

// Desk holds the questions waiting for an answer, so an answer arriving
// any way (a button pressed, a numbered reply, the API) reaches the call
// waiting for it. Safe for concurrent use.
type Desk struct {
	mu      sync.Mutex
	open    map[string]*Pending
	byPlace map[Place][]*Pending // oldest first
}

// NewDesk returns an empty Desk.
func NewDesk() *Desk {
	return &Desk{open: map[string]*Pending{}, byPlace: map[Place][]*Pending{}}
}

// Pending is one question waiting for its answer.
type Pending struct {
	Q     Question
	Place Place
	// MessageID is the platform's id of the message that asks, once sent.
	MessageID string

	answer chan answered
}

type answered struct {
	a  Answer
	by string
}

// Open puts q on the desk, asked at place; Close it when done.
func (d *Desk) Open(q Question, place Place) *Pending {
	p := &Pending{Q: q, Place: place, answer: make(chan answered, 1)}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.open[q.ID] = p
	if place != (Place{}) {
		d.byPlace[place] = append(d.byPlace[place], p)
	}
	return p
}

// Close takes p off the desk: a later answer finds no request.
func (d *Desk) Close(p *Pending) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeLocked(p)
}

func (d *Desk) closeLocked(p *Pending) {
	if d.open[p.Q.ID] != p {
		return
	}
	delete(d.open, p.Q.ID)
	list := slices.DeleteFunc(d.byPlace[p.Place], func(o *Pending) bool { return o == p })
	if len(list) == 0 {
		delete(d.byPlace, p.Place)
	} else {
		d.byPlace[p.Place] = list
	}
}

// Wait waits for the answer and who gave it, or for ctx to end.
func (p *Pending) Wait(ctx context.Context) (Answer, string, error) {
	select {
	case a := <-p.answer:
		return a.a, a.by, nil
	case <-ctx.Done():
		return "", "", ctx.Err()
	}
}

// Question returns the question waiting under id.
func (d *Desk) Question(id string) (Question, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.open[id]
	if !ok {
		return Question{}, false
	}
	return p.Q, true
}

// Answer answers the question id with a, on behalf of by: the person
// asked ("<surface>:<user id>"), or "" for the operator (the API's admin
// token), who may answer any. It returns the question answered.
func (d *Desk) Answer(id, by string, a Answer) (Question, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.open[id]
	if !ok {
		return Question{}, ErrNoRequest
	}
	return p.Q, d.answerLocked(p, by, a)
}

func (d *Desk) answerLocked(p *Pending, by string, a Answer) error {
	if by != "" && p.Q.User != "" && by != p.Q.User {
		return ErrNotYours
	}
	if !slices.Contains(p.Q.Choices, a) {
		return ErrNotOffered
	}
	d.closeLocked(p)
	p.answer <- answered{a: a, by: by} // buffered, and closed off the desk: sent once
	return nil
}

// AnswerNumber takes a numbered reply ("1" to the number of choices) from
// by at place as the answer to the oldest question waiting there for by.
// ok is false when text is no such reply or nothing waits for by there:
// the message is then an ordinary one.
func (d *Desk) AnswerNumber(place Place, by, text string) (q Question, a Answer, ok bool) {
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(text), "."))
	if err != nil || n < 1 {
		return Question{}, "", false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.byPlace[place] {
		if p.Q.User != "" && p.Q.User != by {
			continue
		}
		if n > len(p.Q.Choices) {
			return Question{}, "", false
		}
		a = p.Q.Choices[n-1]
		if d.answerLocked(p, by, a) != nil {
			return Question{}, "", false
		}
		return p.Q, a, true
	}
	return Question{}, "", false
}

// Waiting is how many questions wait for an answer.
func (d *Desk) Waiting() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.open)
}
