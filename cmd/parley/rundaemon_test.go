package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// daemonRun is `parley run` on a test's config, in process, as a daemon
// the commands under test find through its run file.
type daemonRun struct {
	runFile string
	errOut  *syncWriter
	cancel  context.CancelFunc
	done    chan int
}

// runDaemon starts `parley run --config path` in process and returns once
// its run file (beside dbPath) says it is up; the test's end stops it.
func runDaemon(t *testing.T, ctx context.Context, path, dbPath string) *daemonRun {
	t.Helper()
	runCtx, cancel := context.WithCancel(ctx)
	d := &daemonRun{runFile: filepath.Join(filepath.Dir(dbPath), "parley.run.json"), errOut: &syncWriter{w: &bytes.Buffer{}},
		cancel: cancel, done: make(chan int, 1)}
	go func() { d.done <- run(runCtx, []string{"run", "--config", path}, &bytes.Buffer{}, d.errOut) }()
	t.Cleanup(func() { d.stop() })
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(d.runFile); err == nil {
			return d
		}
		select {
		case code := <-d.done:
			d.done <- code
			t.Fatalf("parley run exited %d before it was up:\n%s", code, d.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run file at %s:\n%s", d.runFile, d.errOut)
		}
	}
}

// stop stops the daemon and returns its exit code (the same again when
// called again).
func (d *daemonRun) stop() int {
	d.cancel()
	code := <-d.done
	d.done <- code
	return code
}
