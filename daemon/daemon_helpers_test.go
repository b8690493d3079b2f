package daemon

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/turns"
)

// testDaemon starts a daemon as parley run would, on a fresh SQLite
// database with extra config, its channels from channels (given the daemon,
// so they may use its database). It serves the daemon's HTTP handler and
// returns its URL; stop ends it all and checks the daemon stopped cleanly.
func testDaemon(tb testing.TB, extra string, channels func(d *Daemon) map[adapters.ID]adapters.Adapter) (d *Daemon, url string, stop func()) {
	tb.Helper()
	path, _ := writeConfigTB(tb, extra)
	return testDaemonAt(tb, path, channels)
}

// testDaemonAt is testDaemon on the config file at path.
func testDaemonAt(tb testing.TB, path string, channels func(d *Daemon) map[adapters.ID]adapters.Adapter) (d *Daemon, url string, stop func()) {
	tb.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	d, err = build(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		tb.Fatal(err)
	}
	d.adapters = channels(d)
	hs := httptest.NewServer(httpserve.AppHandler(d.routes(d.APIHandler())))
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	// Messages a test delivers come after start-up, as a channel's do: one
	// delivered during it could also be found unanswered by its recovery
	// and counted as a second turn.
	select {
	case <-d.Ready():
	case err := <-done:
		hs.Close()
		cancel()
		d.Close()
		tb.Fatalf("the daemon did not start: %v", err)
	}
	stopped := false
	return d, hs.URL, func() {
		if stopped {
			return
		}
		stopped = true
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
		d.Close()
	}
}

// configuredChannels is the channels the daemon's config declares, built
// as parley run builds them.
func configuredChannels(tb testing.TB) func(d *Daemon) map[adapters.ID]adapters.Adapter {
	return func(d *Daemon) map[adapters.ID]adapters.Adapter {
		channels, err := adapters.Build(d.cfg(), adapters.BuildOptions{DB: d.db, Vault: d.vault})
		if err != nil {
			tb.Fatal(err)
		}
		return channels
	}
}

// apiOnly is the channels of a daemon driven through its API.
func apiOnly(*Daemon) map[adapters.ID]adapters.Adapter {
	return map[adapters.ID]adapters.Adapter{"api": turns.APIChannel{}}
}
