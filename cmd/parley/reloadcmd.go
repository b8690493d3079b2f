package main

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/runfile"
)

// cmdReload asks the daemon running on this config to read it again (it
// sends SIGHUP, which a service manager's reload does too), and with an API
// token waits to say how it went.
func cmdReload(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("reload")
	token := fs.String("token", "", "an API token of the daemon, to wait for the outcome (default: $PARLEY_API_TOKEN, then the config's first)")
	cfg, err := fs.load(args, 0, "http")
	if err != nil {
		return err
	}
	r, ok := runfile.Read(cfg)
	if !ok {
		return fmt.Errorf("no parley is running on this config (no run file at %s); start it with parley run", runfile.Path(cfg))
	}
	c, _ := runningDaemon(cfg, "", *token)
	var before daemon.Status
	canWait := c.Token != "" && c.Do(ctx, "GET", "/v1/status", nil, &before) == nil
	if err := syscall.Kill(r.PID, syscall.SIGHUP); err != nil {
		return fmt.Errorf("signal parley (pid %d): %w", r.PID, err)
	}
	if !canWait {
		fmt.Fprintf(stdout, "asked parley (pid %d) to reload; its log says how it went\n", r.PID)
		return nil
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var st daemon.Status
		if err := c.Do(ctx, "GET", "/v1/status", nil, &st); err != nil || !st.Reloaded.After(before.Reloaded) {
			continue
		}
		if st.ReloadError != "" {
			return fmt.Errorf("parley kept its running config: %s", st.ReloadError)
		}
		fmt.Fprintf(stdout, "parley (pid %d) reloaded its config\n", r.PID)
		return nil
	}
	return fmt.Errorf("parley (pid %d) didn't say it reloaded within 10 s; see its log", r.PID)
}
