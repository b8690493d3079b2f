//go:build !unix

package mcptools

import (
	"errors"
	"os"
	"os/exec"
)

// runAs can't switch users on this system.
func runAs(_ *exec.Cmd, who string) error {
	if who == "" {
		return nil
	}
	return errors.New("run_as needs a Unix host; drop it, or run parley itself as the user")
}

// terminate ends p; there is no SIGTERM here.
func terminate(p *os.Process) error { return p.Kill() }
