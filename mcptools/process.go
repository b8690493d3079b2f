package mcptools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/config"
)

// stopWait bounds each step of stopping a stdio server: after its input
// closes, after SIGTERM, after SIGKILL.
const stopWait = 2 * time.Second

// environ is a stdio server's whole environment: the variables of
// parley's own that inherit names (those set), then its env (which wins).
// Nothing else of parley's reaches it: not its tokens, not
// PARLEY_SECRET_KEY.
func environ(c config.MCPServer, lookup func(string) (string, bool)) []string {
	var out []string
	for _, name := range c.InheritEnv {
		if v, ok := lookup(name); ok {
			out = append(out, name+"="+v)
		}
	}
	for _, e := range c.Env {
		name, _, _ := strings.Cut(e, "=")
		out = slices.DeleteFunc(out, func(o string) bool { return strings.HasPrefix(o, name+"=") })
		out = append(out, e)
	}
	if out == nil {
		out = []string{} // an empty environment, not parley's (a nil Env is)
	}
	return out
}

// stdioTransport starts a stdio server: its own environment, as its own
// user when run_as says so, each message from it capped, and a stop with
// a deadline at every step.
type stdioTransport struct {
	cfg    config.MCPServer
	lookup func(string) (string, bool) // parley's environment
}

func (t stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	cmd := exec.Command(t.cfg.Command, t.cfg.Args...)
	cmd.Env = environ(t.cfg, t.lookup)
	cmd.Stderr = nil
	if err := runAs(cmd, t.cfg.RunAs); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", t.cfg.Command, err)
	}
	p := &process{cmd: cmd, stdin: stdin}
	// Closing stdout is Wait's: the connection is closed by closing stdin.
	tr := &mcp.IOTransport{Reader: io.NopCloser(stdout), Writer: p, MaxLineLength: t.cfg.MaxMessageMB << 20}
	conn, err := tr.Connect(ctx)
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	return conn, nil
}

// process is a running stdio server; closing it stops it.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	once  sync.Once
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close stops the server as MCP asks, each step bounded: close its input
// and wait, then SIGTERM and wait, then SIGKILL and wait.
func (p *process) Close() error {
	var err error
	p.once.Do(func() { err = p.stop() })
	return err
}

func (p *process) stop() error {
	_ = p.stdin.Close()
	// Wait only once stopping: it closes stdout, which may hold the
	// server's last words until then.
	done := make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(done)
	}()
	wait := func() bool {
		t := time.NewTimer(stopWait)
		defer t.Stop()
		select {
		case <-done:
			return true
		case <-t.C:
			return false
		}
	}
	if wait() {
		return nil
	}
	_ = terminate(p.cmd.Process)
	if wait() {
		return nil
	}
	_ = p.cmd.Process.Kill()
	if wait() {
		return nil
	}
	return errors.New("the server's process did not end after SIGKILL")
}

var _ io.WriteCloser = (*process)(nil)

// lookupEnv is parley's environment, for inherit_env.
var lookupEnv = os.LookupEnv
