package daemon

import (
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/metrics"
	"github.com/parleyd/parley/sessions"
)

// The parts a tool over the daemon (the benchmarks) reads and drives.

// DB is the daemon's database.
func (d *Daemon) DB() *dbutil.DB { return d.db }

// Sessions is the store the daemon writes sessions through.
func (d *Daemon) Sessions() *sessions.SQLStore { return d.sessions }

// Gateway is the daemon's gateway: Deliver takes a message as a channel
// hands it over.
func (d *Daemon) Gateway() *gateway.Gateway { return d.gw }

// Metrics are the daemon's metrics.
func (d *Daemon) Metrics() *metrics.Metrics { return d.metrics }
