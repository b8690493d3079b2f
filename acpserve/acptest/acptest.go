// Package acptest holds what the ACP tests' editors share: the client
// methods an editor that offers no files and no terminals answers with a
// refusal.
package acptest

import (
	"context"
	"errors"

	acp "github.com/coder/acp-go-sdk"
)

// NoFilesNoTerminals is embedded by a test editor (an acp.Client) that
// reads and writes no files and runs no terminals: each such request is
// refused, as parley never sends one.
type NoFilesNoTerminals struct{}

var (
	errNoFiles     = errors.New("the test editor reads and writes no files")
	errNoTerminals = errors.New("the test editor has no terminals")
)

func (NoFilesNoTerminals) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNoFiles
}

func (NoFilesNoTerminals) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNoFiles
}

func (NoFilesNoTerminals) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNoTerminals
}

func (NoFilesNoTerminals) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNoTerminals
}

func (NoFilesNoTerminals) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNoTerminals
}

func (NoFilesNoTerminals) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNoTerminals
}

func (NoFilesNoTerminals) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNoTerminals
}
