package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The parley binary, built once per test run for the tests that check what
// the command line shows of the daemon's work.
var (
	cliOnce sync.Once
	cliBin  string
	cliErr  error
)

// parley runs one parley command line, the built binary, and returns its
// exit code and output.
func parley(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "parley-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliBin = filepath.Join(dir, "parley")
		if out, err := exec.Command("go", "build", "-o", cliBin, "../cmd/parley").CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("build parley: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	cmd := exec.CommandContext(ctx, cliBin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	}
	t.Fatalf("parley %v: %v", args, err)
	return 0, "", ""
}

// writeConfig writes a config using a fresh SQLite file and returns its path.
func writeConfig(t *testing.T, extra string) (string, string) {
	t.Helper()
	return writeConfigTB(t, extra)
}

func writeConfigTB(t testing.TB, extra string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "data", "parley.db")
	path := filepath.Join(dir, "parley.yaml")
	body := fmt.Sprintf("database:\n  url: %s\n%s", dbPath, extra)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, dbPath
}
