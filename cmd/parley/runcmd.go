package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/parleyd/parley/daemon"
)

func cmdRun(ctx context.Context, args []string, stderr io.Writer) error {
	// On another core while the daemon is built: unmapping is a few
	// milliseconds of the kernel's time, and nothing waits for it.
	go daemon.ReleaseInitPages()
	fs := newFlags("run")
	cfg, err := fs.load(args, 0)
	if err != nil {
		return err
	}
	d, err := daemon.New(ctx, cfg, newLogger(stderr, cfg.Log), daemon.WithConfigPath(fs.used), daemon.WithVersion(version()))
	if err != nil {
		return err
	}
	defer d.Close()
	// SIGHUP (parley reload) reads the config again.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				next, _, err := loadConfig(*fs.config)
				_ = d.Reload(ctx, next, err)
			}
		}
	}()
	return d.Run(ctx)
}
