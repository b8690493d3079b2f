package daemon

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/parleyd/parley/runfile"
)

// A replica on the same host may have written the run file since this
// daemon did: stopping leaves that one's record in place.
func TestStopLeavesAnotherDaemonsRunFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.run.json")
	d := &Daemon{log: slog.New(slog.DiscardHandler), listen: "127.0.0.1:1111", runFile: path}
	other, _ := json.Marshal(runfile.Running{PID: os.Getpid() + 1, Listen: "127.0.0.1:2222"})
	if err := os.WriteFile(path, other, 0o600); err != nil {
		t.Fatal(err)
	}
	d.removeRunFile()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("another daemon's run file was removed: %v", err)
	}
	own, _ := json.Marshal(runfile.Running{PID: os.Getpid(), Listen: "127.0.0.1:1111"})
	if err := os.WriteFile(path, own, 0o600); err != nil {
		t.Fatal(err)
	}
	d.runFile = path
	d.removeRunFile()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("its own run file stayed: %v", err)
	}
}
