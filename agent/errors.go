package agent

import "errors"

var (
	// ErrBusy means the session already has a run in this process.
	ErrBusy = errors.New("session is busy with another run")
	// ErrNoModel means no model spec was configured anywhere.
	ErrNoModel = errors.New("no model configured")
	// ErrDuplicateTool means a tool name was registered twice.
	ErrDuplicateTool = errors.New("tool already registered")
	// ErrUnknownTool means a tool name is not registered.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrInvalidTool means a tool can't be registered as given.
	ErrInvalidTool = errors.New("invalid tool")
)
