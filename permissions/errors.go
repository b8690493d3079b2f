package permissions

import "errors"

var (
	// ErrDenied is what every *DeniedError wraps.
	ErrDenied = errors.New("permission denied")
	// ErrNoRequest means no question with that id is waiting for an
	// answer: it was answered, timed out, or never was.
	ErrNoRequest = errors.New("no permission request waits under that id")
	// ErrNotYours means someone other than the person asked answered.
	ErrNotYours = errors.New("only the person who was asked can answer")
	// ErrNotOffered means the answer was not one of the question's choices.
	ErrNotOffered = errors.New("that answer is not offered for this request")
	// ErrNoAnswerHere means the question can't be answered where the
	// turn is: a group on a channel without buttons, where typed answers
	// don't count (a member's "3" is no answer).
	ErrNoAnswerHere = errors.New("nobody can answer a question in a group on a channel without buttons")
)
