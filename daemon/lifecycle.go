package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/mcpserve"
	"github.com/parleyd/parley/runfile"
	"github.com/parleyd/parley/telemetry"
	"github.com/parleyd/parley/turns"
	"github.com/parleyd/parley/webhooks"
)

// shutdownGrace is how long in-flight HTTP requests get after a signal.
const shutdownGrace = 10 * time.Second

// flushTimeout bounds the last sends after the lanes have drained.
const flushTimeout = 10 * time.Second

// spanFlushTimeout bounds sending the last spans at Close, so a collector
// that is down delays the exit by no more.
const spanFlushTimeout = 5 * time.Second

// An Option changes what New builds.
type Option func(*options)

type options struct {
	channels   map[adapters.ID]adapters.Adapter
	configUsed string
	version    string
	spans      telemetry.Exporter
}

// WithSpanExporter sends the daemon's spans to exp, as they end, in place
// of the OTLP collector telemetry.otlp.endpoint names (tests; a benchmark
// that discards them). The rest of the telemetry section applies.
func WithSpanExporter(exp telemetry.Exporter) Option {
	return func(o *options) { o.spans = exp }
}

// WithChannels runs the daemon with only these channels and no HTTP
// server: `parley chat` talks through the terminal, and the bench through
// a channel of its own. Without it, New builds every configured channel,
// cron, the API and the webhooks, and Start serves HTTP.
func WithChannels(ch map[adapters.ID]adapters.Adapter) Option {
	return func(o *options) { o.channels = ch }
}

// WithConfigPath names the config file the daemon was built from, for its
// start-up line.
func WithConfigPath(path string) Option {
	return func(o *options) { o.configUsed = path }
}

// WithVersion is the build's version, for the start-up line.
func WithVersion(v string) Option {
	return func(o *options) { o.version = v }
}

// New opens the database (locking a SQLite file against a second daemon),
// migrates it and builds parley: the data path and its channels. Nothing
// runs until Start. A failed New leaves nothing open.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ...Option) (*Daemon, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	d, err := build(ctx, cfg, log, o.channels, opts...)
	if err != nil {
		return nil, err
	}
	d.configUsed, d.version = o.configUsed, o.version
	if o.channels != nil {
		return d, nil
	}
	channels, err := adapters.Build(cfg, adapters.BuildOptions{Log: d.base, DB: d.db, Vault: d.vault, Refused: func(id adapters.ID, reason string) {
		d.metrics.WebhookRefused("channel:"+string(id), reason)
	}})
	if err != nil {
		d.Close()
		return nil, err
	}
	channels[adapters.ID("cron")] = d.cron
	channels[adapters.ID(turns.APIAdapterID)] = turns.APIChannel{}
	channels[mcpserve.AdapterID] = mcpserve.Channel{}
	// Served with no hooks too, so a hook a reload adds answers at once.
	channels[webhooks.AdapterID] = webhooks.New(webhooks.Options{Hooks: cfg.Hooks, DB: d.db, Notify: d.gw.Notify, QueueNote: d.gw.QueueNote, Log: d.named("webhooks"),
		OnDelivery: d.metrics.WebhookDelivery, OnRefused: d.metrics.WebhookRefused})
	d.adapters = channels
	d.serve = true
	return d, nil
}

// A stopper ends one background loop and waits for it.
type stopper struct {
	name string
	stop func()
}

// goLoop runs fn until Stop, on a context of its own that outlives ctx's
// cancellation (Stop decides when each part ends).
func (d *Daemon) goLoop(ctx context.Context, name string, fn func(context.Context)) {
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); fn(loopCtx) }()
	d.loops = append(d.loops, stopper{name: name, stop: func() { cancel(); <-done }})
}

// Start brings parley up, in order: the HTTP listeners (so a port in use
// fails at once), recovery of what a crash left, the outbox sender, the
// background loops (callbacks, metrics, the API's event feed, the memory
// indexer, pruning, replica leases), then the channels, and last the HTTP
// servers. If a step fails, what already started is stopped before Start
// returns the error.
func (d *Daemon) Start(ctx context.Context) (err error) {
	d.allStopped = make(chan struct{})
	d.liveMu.Lock()
	d.started = time.Now()
	d.liveMu.Unlock()
	if d.serve {
		if d.http, err = httpserve.Listen(d.cfg().HTTP.Listen, d.cfg().HTTP.OpsListen); err != nil {
			return err
		}
	}
	defer func() {
		if err != nil {
			d.stopLoops()
			d.http.Close()
		}
	}()

	if err := d.replicas.Join(ctx, d.cfg().Gateway.AdvertiseURL, d.http.Listener(), d.version); err != nil {
		return err
	}
	if d.replicas != nil {
		d.logStarted("replica", "replica", d.replicas.ID(""), "lease", d.cfg().Gateway.ReplicaLease.Std())
	}
	defer func() {
		if err != nil {
			d.replicas.Leave(context.WithoutCancel(ctx))
		}
	}()
	recovered, err := d.gw.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover unanswered messages: %w", err)
	}
	d.logStarted("database", "engine", d.db.Dialect, "migrations_applied", d.applied, "recovered_messages", recovered)
	d.goLoop(ctx, "sender", func(ctx context.Context) { _ = d.sender.Run(ctx) })
	d.logStarted("outbox sender")
	if d.callbacks != nil {
		d.goLoop(ctx, "callbacks", func(ctx context.Context) { _ = d.callbacks.Run(ctx) })
	}
	d.goLoop(ctx, "session hooks", func(ctx context.Context) { _ = d.sessionHooks.Run(ctx) })
	d.goLoop(ctx, "metrics", func(ctx context.Context) { _ = d.metricsFeed(ctx) })
	d.goLoop(ctx, "channel health", func(ctx context.Context) { d.metrics.WatchChannels(ctx, channelWatchEvery, d.adapters, d.runElsewhere) })
	if d.feed != nil {
		d.goLoop(ctx, "api events", func(ctx context.Context) { _ = d.feed(ctx) })
	}
	d.goLoop(ctx, "memory indexer", func(ctx context.Context) { _ = d.indexer.Run(ctx) })
	d.logStarted("memory", "index", d.memory.Index().Name())
	d.goLoop(ctx, "pruning", func(ctx context.Context) {
		d.sessions.PruneLoop(ctx, func() time.Duration { return d.cfg().Sessions.PruneArchivedAfter.Std() }, d.log)
	})
	if d.replicas != nil {
		d.goLoop(ctx, "replicas", d.replicas.Run)
	}

	d.startAdapters(ctx)
	d.adviseWhenBare()

	if d.serve {
		d.startHTTP(ctx)
	}
	// Once start-up is over, and after each busy spell, hand back what
	// only it used.
	d.goLoop(ctx, "settle", d.settler.Run)
	close(d.ready)
	return nil
}

// Ready is closed once Start has brought every part up: from then on, a
// message delivered is no longer one that start-up's recovery may also
// find unanswered.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// startAdapters starts every channel on a context Stop cancels last.
func (d *Daemon) startAdapters(ctx context.Context) {
	adapterCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.adapterStop = stop
	d.adapterCtx = adapterCtx
	for id, a := range d.adapters {
		if d.replicas.Elected(string(id)) {
			continue // started once this replica holds it
		}
		switch src := adapters.SourceOf(a); {
		case src.Name == "":
			d.logStarted("channel", "adapter", id)
		case src.Started != nil:
			d.logStarted(src.Name, src.Started()...)
		}
		d.startAdapter(id, a)
	}
	d.replicas.StartChannels(ctx)
	go func() { d.adapterWG.Wait(); close(d.allStopped) }()
}

// startAdapter runs one channel until Stop, or until the function it
// returns is called (a replica handing a channel to another, or losing
// it: cause adapters.ErrChannelLost); that function waits for the channel
// to stop.
func (d *Daemon) startAdapter(id adapters.ID, a adapters.Adapter) (stop func(cause error)) {
	adapterCtx, cancel := context.WithCancelCause(d.adapterCtx)
	done := make(chan struct{})
	d.adapterWG.Add(1)
	go func() {
		defer d.adapterWG.Done()
		defer close(done)
		{
			err := a.Start(adapterCtx, d.bridge.Sink())
			switch {
			case err == nil, errors.Is(err, context.Canceled), errors.Is(err, io.EOF):
			case adapterCtx.Err() != nil:
				// Told to stop: what a call cut short by it says (SQLite's
				// "interrupted", say) is no failure.
				d.log.Debug("adapter stopped", "adapter", id, "error", err)
			default:
				d.log.Error("adapter stopped", "adapter", id, "error", err)
				d.metrics.AdapterError(string(id))
				d.failMu.Lock()
				d.failed = errors.Join(d.failed, fmt.Errorf("adapter %s: %w", id, err))
				d.failMu.Unlock()
			}
		}
	}()
	return func(cause error) { cancel(cause); <-done }
}

// logStarted logs, at info, that a part of parley started: one line each,
// so an operator sees what runs.
func (d *Daemon) logStarted(part string, args ...any) {
	if d.serve {
		d.log.Info("started "+part, args...)
	}
}

// adviseWhenBare tells an operator who configured no channel, or no API
// token, how to talk to the agent all the same.
func (d *Daemon) adviseWhenBare() {
	if !d.serve {
		return
	}
	cfg := d.cfg()
	if len(cfg.Adapters) == 0 {
		if len(cfg.HTTP.Tokens) > 0 {
			d.log.Info("no chat channels are configured: talk to the agent in the web chat at http://" + cfg.HTTP.Listen + "/ with one of http.tokens, or run parley chat; add Telegram, Discord or WhatsApp with parley init or under adapters")
		} else {
			d.log.Info("no chat channels are configured: run parley chat to talk to the agent here, or parley init to set up a channel")
		}
	}
	if len(cfg.HTTP.Tokens) == 0 {
		d.log.Info("the HTTP API, the web chat and the dashboard are off until http.tokens has a token: parley init writes one, or set one made with openssl rand -hex 32")
	}
}

// startHTTP serves the API, the web chat, the webhooks and the health and
// metrics routes (on http.ops_listen when it is set).
func (d *Daemon) startHTTP(ctx context.Context) {
	addr := d.http.Listener().Addr().String()
	d.liveMu.Lock()
	d.listen = addr
	d.liveMu.Unlock()
	d.writeRunFile()
	// The web chat and the dashboard are named where they answer: with no
	// token they are off, as the line before said.
	webChat, dashboard := "off (no http.tokens)", "off (no http.tokens)"
	if len(d.cfg().HTTP.Tokens) > 0 {
		webChat, dashboard = httpserve.LocalURL(addr)+"/", httpserve.LocalURL(addr)+"/admin"
	}
	d.log.InfoContext(ctx, "parley started", "version", d.version, "config", config.DisplayPath(d.configUsed),
		"database", d.cfg().Database.URL, "engine", d.db.Dialect, "migrations_applied", d.applied,
		"listen", addr, "agents", len(d.cfg().Agents), "web_chat", webChat, "dashboard", dashboard)
	d.http.Serve(d.routes(d.lazyAPI()))
}

// Done is closed when the daemon can't go on by itself: every channel has
// stopped (the terminal closed under parley chat). It never closes for a
// daemon with no channels.
func (d *Daemon) Done() <-chan struct{} {
	if len(d.adapters) == 0 {
		return nil
	}
	return d.allStopped
}

// ServeErr reports the HTTP server's failure; nil without one.
func (d *Daemon) ServeErr() <-chan error { return d.http.Failed() }

// Stop shuts parley down in the order that loses nothing: stop accepting
// (the HTTP listeners close; requests in flight get shutdownGrace), drain
// the lanes within the shutdown timeout, stop the sender after its sends
// in flight, send what is left, and only then stop the channels, so
// replies from the last turns still have a channel to leave by; then the
// background loops, last started first. It returns the channels' failures.
func (d *Daemon) Stop(ctx context.Context) error {
	var httpErr error
	httpDone := make(chan struct{})
	go func() { defer close(httpDone); httpErr = d.http.Shutdown(ctx, shutdownGrace) }()

	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg().Gateway.ShutdownTimeout.Std())
	defer cancel()
	if err := d.gw.Close(shutCtx); err != nil {
		d.log.Warn("turns cut short at shutdown; they run again on the next start", "error", err)
	}
	d.stopLoop("sender")
	flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancelFlush()
	for {
		if n, err := d.sender.SendDue(flushCtx); n == 0 || err != nil {
			break
		}
	}
	if d.adapterStop != nil {
		d.adapterStop()
		d.adapterWG.Wait()
	}
	<-httpDone
	d.removeRunFile()
	if d.replicas != nil {
		d.stopLoop("replicas")
		d.replicas.Leave(context.WithoutCancel(ctx))
	}
	d.stopLoops()
	d.mcp.Close()
	d.http.Close()
	d.failMu.Lock()
	defer d.failMu.Unlock()
	return errors.Join(httpErr, d.failed)
}

// stopLoop stops the named background loop now.
func (d *Daemon) stopLoop(name string) {
	for i, l := range d.loops {
		if l.name == name {
			l.stop()
			d.loops = append(d.loops[:i], d.loops[i+1:]...)
			return
		}
	}
}

// stopLoops stops the background loops, last started first.
func (d *Daemon) stopLoops() {
	for i := len(d.loops) - 1; i >= 0; i-- {
		d.loops[i].stop()
	}
	d.loops = nil
}

// Run starts parley, runs it until ctx ends (or every channel has stopped,
// or the HTTP server fails), and stops it.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.Start(ctx); err != nil {
		return err
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case <-d.Done():
	case err := <-d.ServeErr():
		serveErr = fmt.Errorf("http server: %w", err)
	case <-d.replicas.Fenced():
		// Fenced: the other replicas have this one's work, so it stops
		// at once, writing nothing (draining would answer twice), its
		// channels first: none may reach its platform again.
		d.replicas.LoseChannels("this replica was fenced")
		if d.adapterStop != nil {
			d.adapterStop()
		}
		return cluster.ErrFenced
	}
	if d.serve {
		d.log.Info("parley stopping")
	}
	err := errors.Join(serveErr, d.Stop(ctx))
	if err == nil && d.serve {
		d.log.Info("parley stopped")
	}
	return err
}

// Close releases the database and its lock.
func (d *Daemon) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), spanFlushTimeout)
	defer cancel()
	if err := d.tracer.Shutdown(ctx); err != nil {
		d.log.Warn("the last spans were not sent", "error", err)
	}
	d.db.Close()
	d.release()
}

// writeRunFile records the daemon's address; the file is removed at Stop.
func (d *Daemon) writeRunFile() {
	path := runfile.Path(d.cfg())
	if path == "" {
		return
	}
	if err := runfile.Write(path, runfile.Running{PID: os.Getpid(), Listen: d.listen, Version: d.version, Started: d.started}); err != nil {
		d.log.Debug("record the daemon's address", "path", path, "error", err)
		return
	}
	d.runFile = path
}

// removeRunFile removes the run file this daemon wrote, unless another
// daemon (a replica on the same host) has written it since.
func (d *Daemon) removeRunFile() {
	if d.runFile != "" {
		runfile.Remove(d.runFile, runfile.Running{PID: os.Getpid(), Listen: d.listen})
		d.runFile = ""
	}
}
