package permissions

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDesk(t *testing.T) {
	d := NewDesk()
	place := Place{Adapter: "wa", Chat: "group-1"}
	q := Question{ID: "q1", User: "whatsapp:alice", Tool: "gh__list", Choices: allChoices}
	p := d.Open(q, place)

	// Only the person asked answers; the operator ("") may too.
	if _, err := d.Answer("q1", "whatsapp:bob", AllowOnce); !errors.Is(err, ErrNotYours) {
		t.Fatalf("bob answered: %v", err)
	}
	if _, err := d.Answer("nope", "whatsapp:alice", AllowOnce); !errors.Is(err, ErrNoRequest) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := d.Answer("q1", "whatsapp:alice", "maybe"); !errors.Is(err, ErrNotOffered) {
		t.Fatalf("an answer not offered: %v", err)
	}
	// A number from someone else, or out of range, or not a number, is an
	// ordinary message.
	for _, tc := range []struct{ by, text string }{{"whatsapp:bob", "1"}, {"whatsapp:alice", "5"}, {"whatsapp:alice", "yes"}, {"whatsapp:alice", "0"}} {
		if _, _, ok := d.AnswerNumber(place, tc.by, tc.text); ok {
			t.Fatalf("%s's %q answered", tc.by, tc.text)
		}
	}
	if _, _, ok := d.AnswerNumber(Place{Adapter: "wa", Chat: "other"}, "whatsapp:alice", "1"); ok {
		t.Fatal("a number in another chat answered")
	}
	got, a, ok := d.AnswerNumber(place, "whatsapp:alice", " 2. ")
	if !ok || a != AllowSession || got.ID != "q1" {
		t.Fatalf("alice's 2: %v %v %v", got.ID, a, ok)
	}
	ans, by, err := p.Wait(context.Background())
	if err != nil || ans != AllowSession || by != "whatsapp:alice" {
		t.Fatalf("Wait = %v %q %v", ans, by, err)
	}
	// Answered: off the desk.
	if _, err := d.Answer("q1", "", AllowOnce); !errors.Is(err, ErrNoRequest) || d.Waiting() != 0 {
		t.Fatalf("answered twice: %v, %d waiting", err, d.Waiting())
	}

	// Two questions in one chat: a number answers the oldest.
	p1 := d.Open(Question{ID: "a", User: "u", Choices: allChoices}, place)
	p2 := d.Open(Question{ID: "b", User: "u", Choices: allChoices}, place)
	if q, _, ok := d.AnswerNumber(place, "u", "4"); !ok || q.ID != "a" {
		t.Fatalf("oldest first: %v %v", q.ID, ok)
	}
	if _, err := d.Answer("b", "", Refuse); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Pending{p1, p2} {
		if a, _, _ := p.Wait(context.Background()); a != Refuse {
			t.Fatalf("%s: %v", p.Q.ID, a)
		}
	}
	// A closed question takes no answer; Wait ends with its context.
	p3 := d.Open(Question{ID: "c", Choices: allChoices}, place)
	d.Close(p3)
	if _, err := d.Answer("c", "", AllowOnce); !errors.Is(err, ErrNoRequest) {
		t.Fatalf("closed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, _, err := p3.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a closed question: %v", err)
	}
}

func TestQuestionText(t *testing.T) {
	q := Question{Tool: "gh__search", Arguments: []byte(`{ "q" : "bug" }`), Choices: allChoices}
	want := "The assistant wants to use the tool gh__search with {\"q\":\"bug\"}. Allow it?\nReply with a number:\n1. Allow once\n2. Always in this chat\n3. Always\n4. Deny"
	if got := q.Numbered(); got != want {
		t.Fatalf("Numbered:\n%s\nwant\n%s", got, want)
	}
	long := Question{Tool: "x", Arguments: []byte(`{"a":"` + strings.Repeat("y", 1000) + `"}`)}
	if n := len([]rune(long.Text())); n > 400 {
		t.Fatalf("long arguments are shown whole (%d runes)", n)
	}
	for _, s := range []string{"once", " Always ", "SESSION", "deny"} {
		if _, err := ParseAnswer(s); err != nil {
			t.Errorf("ParseAnswer(%q): %v", s, err)
		}
	}
	if _, err := ParseAnswer("yes"); err == nil {
		t.Error("ParseAnswer(yes) passed")
	}
}
