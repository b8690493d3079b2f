package tools

import "errors"

var (
	// ErrDuplicateTool means a tool name was registered twice.
	ErrDuplicateTool = errors.New("tool already registered")
	// ErrUnknownTool means a tool name is not registered (or was not
	// offered to the agent that called it).
	ErrUnknownTool = errors.New("unknown tool")
	// ErrInvalidTool means a tool can't be registered as given.
	ErrInvalidTool = errors.New("invalid tool")
	// ErrInvalidArguments means a call's arguments did not match the
	// tool's schema; the call did not run.
	ErrInvalidArguments = errors.New("invalid arguments")
	// ErrAborted means a call was cut short because its context ended.
	ErrAborted = errors.New("aborted")
)
