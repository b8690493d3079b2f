package agent

import "errors"

var (
	// ErrBusy means the session already has a run in this process.
	ErrBusy = errors.New("session is busy with another run")
	// ErrNoModel means no model spec was configured anywhere.
	ErrNoModel = errors.New("no model configured")
	// errModelCallFailed is the result of each tool call a failed model
	// call asked for: the call never ran.
	errModelCallFailed = errors.New("the model call failed before this tool ran")
	// errNoResult answers, in a rebuilt prompt, a tool call whose result
	// was never stored (a crash mid-step).
	errNoResult = errors.New("no result was recorded")
)

// RefusedError is a turn refused before it ran, with what to tell the
// person: the gateway tells them Text as it is.
type RefusedError struct {
	Text   string
	Reason string // for the log, e.g. "session spend cap"
}

func (e *RefusedError) Error() string { return e.Text }

// UserMessage is what the person is told.
func (e *RefusedError) UserMessage() string { return e.Text }
