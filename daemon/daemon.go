package daemon

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/adapters"
	// The channels parley ships: each registers itself.
	_ "github.com/parleyd/parley/adapters/discord"
	_ "github.com/parleyd/parley/adapters/telegram"
	_ "github.com/parleyd/parley/adapters/whatsapp"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/budgets"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/harness"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/internal/trim"
	// The model providers parley ships: each registers itself.
	_ "github.com/parleyd/parley/llm/anthropic"
	"github.com/parleyd/parley/llm/echo"
	_ "github.com/parleyd/parley/llm/openai"
	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/memory"
	"github.com/parleyd/parley/metrics"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/secret"
	"github.com/parleyd/parley/sessionhooks"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/telemetry"
	"github.com/parleyd/parley/tools"
	"github.com/parleyd/parley/turns"
	"github.com/parleyd/parley/vault"
)

// Daemon is parley running: the store, the agent runner, the gateway with
// its lanes, the outbox sender, the adapters and the HTTP server. Build it
// with New, then Start it and Stop it (or Run it, which does both), and
// Close it.
type Daemon struct {
	settler  *trim.Settler                 // hands memory back after busy spells
	conf     atomic.Pointer[config.Config] // replaced by Reload; read with cfg
	log      *slog.Logger                  // the daemon's own lines (component=daemon)
	base     *slog.Logger                  // the parts' loggers are named from it (named)
	db       *dbutil.DB
	sessions *sessions.SQLStore
	runner   *agent.Runner
	gw       *gateway.Gateway
	sender   *gateway.Sender
	memory   *memory.Store
	cron     *cron.Scheduler
	metrics  *metrics.Metrics
	bus      *events.Bus // what happens in runs and sessions, in process
	events   *api.EventLog
	// callbacks POSTs replies to API sessions' webhook_url; nil without a
	// callback secret.
	callbacks *api.Callbacks
	// sessionHooks queues and posts sessions' lifecycle events.
	sessionHooks *sessionhooks.Hooks
	// harnesses resolve what sessions run on beyond their agent.
	harnesses *harness.Set
	feed      func(context.Context) error // fills events from the bus
	// metricsFeed counts turns, tokens and compactions from the bus.
	metricsFeed func(context.Context) error
	offline     *echo.Model // answers for agents without a provider key
	indexer     *memory.Indexer
	store       *gateway.Store
	vault       *vault.Store // secrets and people's own tokens
	// scrubber hides every secret parley knows (the secrets store's
	// values and key, MCP servers' env and headers, people's tokens) in
	// tool results, errors and log lines.
	scrubber *secret.Scrubber
	// tracer starts the spans of turns, requests and cron fires; nil with
	// tracing off.
	tracer *telemetry.Tracer
	mcp    *mcptools.Manager        // the MCP servers' tools
	tools  *tools.Registry          // every tool agents may call
	perms  *permissions.Checker     // checks every tool call
	caps   adapters.CapabilityCache // the channels' capabilities, read once
	budget *budgets.Caps            // the daily spend caps
	bridge *turns.Bridge            // runs the gateway's turns through the agent
	desk   *permissions.Desk        // permission questions waiting for their answer
	sessionTools
	adapters map[adapters.ID]adapters.Adapter
	release  func()
	applied  int

	// What Start started, for Stop.
	serve      bool   // serve HTTP (parley run; not parley chat)
	configUsed string // the config file's path, for the start-up line
	version    string // the build's, for the start-up line
	runFile    string // the run file this daemon wrote
	// ready is closed when Start has finished (Ready).
	ready chan struct{}
	// liveMu guards what status reads while Start and reload write it.
	liveMu      sync.Mutex
	started     time.Time          // when Start began
	listen      string             // the app server's address, once listening
	reloadedAt  time.Time          // the last reload, ok or not
	reloadErr   string             // why it failed
	http        *httpserve.Servers // the app's server and the optional ops server
	loops       []stopper          // background loops, stopped last to first
	adapterStop context.CancelFunc
	adapterWG   sync.WaitGroup
	allStopped  chan struct{}   // closed when every adapter has stopped
	adapterCtx  context.Context // the channels' context, once started
	failMu      sync.Mutex
	failed      error // adapters that stopped with an error
	// replicas is this daemon's part among replicas sharing PostgreSQL
	// (nil on SQLite).
	replicas *cluster.Node
}

// build opens the database (locking a SQLite file against a second
// daemon), migrates it and builds the data path with the channels given
// (tests and parley chat add theirs). Close it with Close.
func build(ctx context.Context, cfg *config.Config, log *slog.Logger, ads map[adapters.ID]adapters.Adapter, opts ...Option) (*Daemon, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	scrubber := secret.NewScrubber()
	log = slog.New(scrubber.Handler(log.Handler()))
	d := &Daemon{log: log.With("component", "daemon"), base: log, adapters: ads, release: func() {}, scrubber: scrubber, ready: make(chan struct{})}
	d.conf.Store(cfg)
	if t, err := dbutil.ParseURL(cfg.Database.URL.Reveal()); err == nil && t.Dialect == dbutil.SQLite {
		release, err := dbutil.LockSQLite(t.Path)
		if err != nil {
			return nil, err
		}
		d.release = release
	}
	db, applied, err := OpenDatabase(ctx, cfg, log)
	if err != nil {
		d.release()
		return nil, err
	}
	d.db, d.applied = db, applied
	if db.Dialect == dbutil.SQLite {
		db.HoldsFile() // locked above: no other process writes it
	}
	// ${secret:NAME} values are resolved before anything reads them.
	if err := d.openVault(ctx, cfg); err != nil {
		db.Close()
		d.release()
		return nil, err
	}

	tracer, err := newTracer(ctx, cfg, o, scrubber, log)
	if err != nil {
		db.Close()
		d.release()
		return nil, err
	}
	// Lines logged within a span carry its trace_id.
	log = slog.New(tracer.LogHandler(log.Handler()))
	d.tracer, d.base, d.log = tracer, log, log.With("component", "daemon")
	d.openReplicas(cfg)
	d.metrics = metrics.New()
	d.budget = budgets.New(db, func() config.Budgets { return d.cfg().Budgets }, d.metrics.BudgetRefused)
	db.Observe(d.metrics.ObserveDB())
	bus := events.New()
	d.bus = bus
	d.metricsFeed = d.metrics.Feed(bus) // subscribes now, before any run
	// The spend caps count each reply's usage with it (nothing while no
	// cap is set).
	storeOpts := []sessions.Option{sessions.WithBus(bus), sessions.WithLogger(d.named("sessions")), sessions.WithAppendHook(d.budget.Record),
		sessions.WithHistoryCache(cfg.Database.HistoryCacheMB << 20)}
	// Deleting a session deletes every copy of its text.
	storeOpts = append(storeOpts, sessions.WithDeleteHook(gateway.ForgetSessions), sessions.WithDeleteHook(cron.ForgetSessions),
		sessions.WithDeleteHook(func(ctx context.Context, q dbutil.Querier, in string, args []any) error {
			return d.memory.ForgetSessions(ctx, q, in, args)
		}))
	if cfg.HTTP.CallbackSecret.Reveal() != "" {
		// A reply's callback is queued in the transaction that stores it.
		storeOpts = append(storeOpts, sessions.WithAppendHook(api.ReplyCallbackHook(0)))
	}
	// Sessions' lifecycle events for the session hooks: queued in the
	// transaction of each change (nothing while no hook is configured).
	d.sessionHooks = sessionhooks.New(sessionhooks.Options{DB: db, Hooks: func() []config.SessionHook { return d.cfg().SessionHooks },
		Log: d.named("session_hooks")})
	storeOpts = append(storeOpts, d.sessionHooks.StoreOptions()...)
	// d.sessions is the one store the daemon writes sessions through; on
	// a SQLite file it holds (above), it then reads no remembered session.
	storeOpts = append(storeOpts, sessions.WithSoleWriter())
	d.sessions = sessions.NewStore(db, storeOpts...)
	if secret := cfg.HTTP.CallbackSecret.Reveal(); secret != "" {
		d.callbacks = api.NewCallbacks(api.CallbackOptions{DB: db, Store: d.sessions, Bus: bus, Secret: secret, Log: d.named("callbacks"), Owner: d.replicas.ID(cfg.Gateway.ReplicaID),
			Allow: cfg.HTTP.CallbackAllow})
	}
	if len(cfg.HTTP.Tokens) > 0 {
		// The API's run event log, only where the API can be used: it
		// follows every event of every run.
		d.events = api.NewEventLogWith(api.EventLogOptions{MaxBytes: int64(cfg.HTTP.EventLogMB) << 20,
			Runs: api.NewRunRecords(db), Log: d.named("events")})
		d.feed = d.events.Feed(bus) // subscribes now, before any run
	}
	for _, id := range cfg.MissingKeys() {
		a, _ := cfg.Agent(id)
		log.Warn("no API key for the agent's model; its chats are told the assistant isn't configured until providers has a key",
			"agent_id", id, "model", a.Model)
	}
	fail := func(err error) (*Daemon, error) {
		_ = tracer.Shutdown(context.WithoutCancel(ctx))
		db.Close()
		d.release()
		return nil, err
	}
	if d.memory, err = memory.Open(ctx, db, cfg.Memory, d.named("memory")); err != nil {
		return fail(err)
	}
	d.indexer = memory.NewIndexer(d.memory, memory.WithIndexerLogger(d.named("indexer")))
	// The cron scheduler is the "cron" channel: its fires enter the
	// gateway like any message, and their replies come back to it.
	if d.cron, err = cron.Open(ctx, db, cfg, cron.Options{
		Notifier: cron.NotifierFunc(func(ctx context.Context, n cron.Notice) error {
			return d.gw.Notify(ctx, n.Target.String(), n.Text, n.Key)
		}),
		QueueNote: func(ctx context.Context, q dbutil.Querier, n cron.Notice) error {
			return d.gw.QueueNote(ctx, q, n.Target.String(), n.Text, n.Key, n.Files...)
		},
		Abort:      func(k sessions.Key) bool { return d.gw.Abort(k) },
		OnEnd:      func(st cron.Status) { d.metrics.CronRun(string(st)) },
		Unattended: cron.UnattendedFor(d.cfg),
		Jobs:       func() int { return len(d.cfg().Cron.Jobs) },
		Tracer:     d.tracer,
		Log:        d.named("cron"),
	}); err != nil {
		return fail(err)
	}
	toolReg := tools.NewRegistry()
	d.offline = echo.New()
	models := d.metrics.Models(turns.ModelsWith(cfg, d.offline))
	compactor := memory.NewCompactor(memory.CompactorOptions{Sessions: d.sessions, Memory: d.memory, Models: models, Bus: bus, Log: d.named("compaction")})
	d.openSessionTools(cfg, toolReg)
	d.runner = agent.New(agent.Options{Store: d.sessions, Models: models, DefaultModel: echo.Name, Admit: d.budget.Admit,
		Tools: toolReg, Bus: bus, Log: d.named("agent"), Compactor: compactor, ClientTools: d.clientTools, StoredFile: d.files.Read})
	d.mcp = mcptools.New(cfg.MCP.Servers, toolReg, d.named("mcp"))
	d.mcp.SetTokens(mcptools.VaultTokens(d.vault, scrubber.Add))
	d.mcp.SetScrubber(scrubber)
	toolReg.SetScrub(scrubber.Scrub)
	mcptools.WarnSecretArgs(cfg, scrubber.Scrub, log)
	d.tools = toolReg
	if err := d.openPermissions(cfg, toolReg); err != nil {
		return fail(err)
	}
	// The tools are registered where `parley config check` finds them too.
	if err := d.registerTools(toolReg); err != nil {
		return fail(err)
	}
	if err := mcptools.CheckAgentTools(cfg, toolReg.Names()); err != nil {
		return fail(err)
	}

	store := gateway.NewStore(db, nil, d.storeOptions(cfg)...)
	d.store = store
	transcriber, speaker := gateway.SpeechOf(cfg)
	d.sender = gateway.NewSender(store, gateway.SenderOptions{Adapter: d.adapter, Log: d.named("outbox"),
		OnSend:  func(id adapters.ID, took time.Duration, err error) { d.metrics.SendObserved(string(id), took, err) },
		OnRetry: func(adapters.ID) { d.metrics.OutboxRetry() }, OnReclaim: d.metrics.OutboxReclaimed, Alive: d.replicas.Alive(), Files: d.files,
		Speaker: speaker})

	d.harnesses = harness.New(db, d.cfg)
	d.bridge = turns.New(turns.Options{Config: d.cfg, Runner: d.runner, Sessions: d.sessions, MCP: d.mcp, Caps: d.budget, Harnesses: d.harnesses,
		Desk: d.desk, Perms: d.perms, Channel: d.adapter, AbortElsewhere: d.abortOnHolder, Files: d.files, Log: d.named("turns")})
	route, workspace, surface := gateway.ConfigRoutes(d.cfg)
	gwOpts := gateway.Options{
		Store: store, Sessions: d.sessions, Sender: d.sender,
		Runner:      d.bridge,
		Channels:    gateway.ChannelsOf(cfg, d.adapter),
		Route:       route,
		Workspace:   workspace,
		Agents:      gateway.AgentsOf(cfg),
		Recovery:    gateway.Recovery(cfg.Gateway.Recovery),
		Surface:     surface,
		Access:      gateway.AccessOf(cfg),
		OnDuplicate: d.metrics.DuplicateDropped,
		Connections: mcptools.Connections{Vault: d.vault, Config: d.cfg},
		Transcriber: transcriber,
		Speaks:      cfg.Speech.Enabled(),
		Lanes:       gateway.LaneOptions[string]{Cap: cfg.Gateway.QueueCap, Debounce: cfg.Gateway.Debounce.Std()},
		Tracer:      d.tracer,
		Log:         d.named("gateway"),
	}
	if d.replicas != nil {
		gwOpts.Placement = d.replicas
	}
	d.gw, err = gateway.New(gwOpts)
	if err != nil {
		return fail(err)
	}
	d.bridge.Attach(d.gw)
	d.settler = d.newSettler()
	return d, nil
}

// cfg is the config the daemon runs on now.
func (d *Daemon) cfg() *config.Config { return d.conf.Load() }

// channelWatchEvery is how often channels' health is sampled for metrics.
const channelWatchEvery = 5 * time.Second

func (d *Daemon) adapter(id adapters.ID) (adapters.Adapter, bool) {
	a, ok := d.adapters[id]
	return a, ok
}

func (d *Daemon) limit(id adapters.ID) int {
	return d.caps.Of(id, d.adapters[id]).MaxMessageLength
}

// named is the logger of one part of the daemon, carrying its name as
// "component", as every line it writes does.
func (d *Daemon) named(component string) *slog.Logger {
	if d.base == nil {
		return slog.New(slog.DiscardHandler) // a Daemon a test made by hand
	}
	return d.base.With("component", component)
}

// newTracer is the tracer the telemetry section describes (nil: off),
// sending to o's exporter instead when it has one.
func newTracer(ctx context.Context, cfg *config.Config, o options, scrubber *secret.Scrubber, log *slog.Logger) (*telemetry.Tracer, error) {
	t := cfg.Telemetry
	return telemetry.New(ctx, telemetry.Options{Endpoint: t.OTLP.Endpoint, Protocol: t.OTLP.Protocol, SampleRatio: t.SampleRatio,
		Resource: t.ResourceAttributes, RecordContent: t.RecordContent, Version: o.version, Scrub: scrubber.Scrub,
		Exporter: o.spans, Log: log.With("component", "telemetry")})
}
