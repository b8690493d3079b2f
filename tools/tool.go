// Package tools is where parley's tools are registered and called: the
// Registry, the JSON Schema subset tool arguments are checked against, and
// Decode, the one strict reader of a tool's arguments. Built-in tools live
// with their domain (memory, cron, the agent's sessions_spawn) and are
// defined against these types; the agent loop runs every call through
// Registry.Call.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
)

// Tool is a function the model may call. Its arguments are validated against
// Schema (a JSON Schema of the arguments object; empty means any object)
// before Run sees them.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	// Run does the work. A returned error becomes a failed Result: the
	// model is told "error: " and the error's text, so the text should say
	// what went wrong and what to do.
	Run func(ctx context.Context, call Call) (string, error)
	// Retry, if set, tries a call that failed in a way worth trying again
	// (a timeout, what it called unavailable or rate limiting) again.
	Retry *Retry
	// Server names the MCP server the tool is of ("" for a built-in), for
	// its calls' spans.
	Server string
}

// Decoded is a Tool's Run that reads the call's arguments into an A with
// Decode before run sees them. Arguments Decode refuses are refused as
// "<tool>: <what is wrong>; pass <example>", so the model reads what to send.
func Decoded[A any](tool, example string, run func(ctx context.Context, call Call, args A) (string, error)) func(context.Context, Call) (string, error) {
	return func(ctx context.Context, call Call) (string, error) {
		var args A
		if err := Decode(call.Arguments, &args); err != nil {
			return "", fmt.Errorf("%s: %w; pass %s", tool, err, example)
		}
		return run(ctx, call, args)
	}
}

// Call is one invocation of a tool, with the session it runs for.
type Call struct {
	// Name is the tool called.
	Name      string
	SessionID sessions.ID
	Key       sessions.Key
	// ID is the model's tool call id.
	ID        string
	Arguments json.RawMessage
	// Origin is who stands behind the call, for its permission check: the
	// person the turn answers and how to ask them (see permissions).
	Origin permissions.Origin
	// Attach, when set, adds a part to the turn's reply: a file part
	// (send_file) is sent to the chat with it. Nil outside a turn.
	Attach func(sessions.Part)
	// Retrying, when set, hears of each failed try the tool's retry
	// policy tries again, before the wait.
	Retrying func(failed Attempt, wait time.Duration)
}

// Result is what one tool call gave: the text the model is given, and
// whether the call failed. IsError is the fact; Content is only its words.
type Result struct {
	// Content is what the model reads: the tool's output, or for a failed
	// call what went wrong ("error: ..."), or "aborted".
	Content string
	// IsError is set when the call failed or was aborted.
	IsError bool
	// Err is why a failed call failed, for the caller to log or inspect
	// with errors.Is and errors.As: the tool's own error, ErrUnknownTool,
	// ErrInvalidArguments, ErrAborted or a *PanicError. Nil on success.
	Err error
	// Attempts are the failed tries before the last, when the tool's
	// retry policy tried the call again.
	Attempts []Attempt
}

// errorPrefix starts every failed call's text, as the model has always
// read it.
const errorPrefix = "error: "

// Output is the result of a call that succeeded with out.
func Output(out string) Result { return Result{Content: out} }

// Failed is the result of a call that failed with err: the model reads
// "error: " and err's text.
func Failed(err error) Result {
	return Result{Content: errorPrefix + err.Error(), IsError: true, Err: err}
}

// Aborted is the result of a call cut short because its turn ended; text
// says by what ("aborted", "aborted by parent").
func Aborted(text string, cause error) Result {
	err := ErrAborted
	if cause != nil {
		err = fmt.Errorf("%w: %w", ErrAborted, cause)
	}
	return Result{Content: text, IsError: true, Err: err}
}

// PanicError is the error of a call whose tool panicked.
type PanicError struct {
	Tool  string
	Value any
	// Stack is the panicking goroutine's stack, for the log.
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("tool %s crashed: %v", e.Tool, e.Value) }
