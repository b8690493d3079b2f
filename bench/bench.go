// Package bench measures parley: the whole path in process (Run: turns per
// second, latency, the durable append rate it is bounded by, CPU and
// memory per turn) and a daemon started as parley run starts it (Idle:
// start-up, idle memory and CPU, and a burst). It drives the daemon only
// through what the daemon exports.
package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

// Result is what `parley bench --json` prints.
type Result struct {
	Engine   string `json:"engine"`
	Sessions int    `json:"sessions"`
	Turns    int    `json:"turns"`
	// Deliveries is how many messages the bench hands the gateway at once.
	Deliveries  int     `json:"deliveries"`
	TurnsPerSec float64 `json:"turns_per_sec"`
	// Overhead is the gateway's own time per turn: Deliver to Send, less
	// the time the turn waited on the database, measured one turn at a
	// time so no turn waits behind another.
	OverheadP50ms float64 `json:"overhead_p50_ms"`
	OverheadP99ms float64 `json:"overhead_p99_ms"`
	OverheadMaxms float64 `json:"overhead_max_ms"`
	OverheadTurns int     `json:"overhead_turns"`
	// StoreWaitP50ms is what those turns waited on the database.
	StoreWaitP50ms float64 `json:"store_wait_p50_ms"`
	// Latency is Deliver to Send with every conversation in flight at once.
	LatencyP50ms    float64 `json:"latency_p50_ms"`
	LatencyP99ms    float64 `json:"latency_p99_ms"`
	LatencyMaxms    float64 `json:"latency_max_ms"`
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	RawAppendPerSec float64 `json:"raw_append_per_sec"`
	AppendsPerTurn  float64 `json:"appends_per_turn"`
	LimitRatio      float64 `json:"limit_ratio"`
	// WriterBusy and RawWriterBusy are the share of the run's time SQLite's
	// writer spent in transactions, under the turns and under raw appends;
	// WriterCommit and RawWriterCommit, the share of that in commits (0 on
	// PostgreSQL). A writer busy near 1 is the limit.
	WriterBusy      float64 `json:"writer_busy,omitempty"`
	WriterCommit    float64 `json:"writer_commit,omitempty"`
	RawWriterBusy   float64 `json:"raw_writer_busy,omitempty"`
	RawWriterCommit float64 `json:"raw_writer_commit,omitempty"`
	// WALFramesPerTurn and RawWALFramesPerAppend are the pages SQLite
	// wrote to its write-ahead log per turn and per raw append (0 on
	// PostgreSQL).
	WALFramesPerTurn      float64 `json:"wal_frames_per_turn,omitempty"`
	RawWALFramesPerAppend float64 `json:"raw_wal_frames_per_append,omitempty"`
	// CommitsPerTurn and RawCommitsPerAppend are the commits (on SQLite,
	// each an fsync that a batch of transactions shares) per turn and per
	// raw append.
	CommitsPerTurn      float64 `json:"commits_per_turn"`
	RawCommitsPerAppend float64 `json:"raw_commits_per_append"`
	// FsyncsPerTurn and RawFsyncsPerAppend are the fsyncs that made those
	// commits durable (SQLite): one covers every commit made while the
	// last one ran.
	FsyncsPerTurn      float64 `json:"fsyncs_per_turn,omitempty"`
	RawFsyncsPerAppend float64 `json:"raw_fsyncs_per_append,omitempty"`
	// CPUmsPerTurn and RawCPUmsPerAppend are the process's CPU time (user
	// and system, every goroutine) per turn under load and per raw append
	// (Linux only).
	CPUmsPerTurn float64 `json:"cpu_ms_per_turn,omitempty"`
	// ReadsPerTurn counts the reads (DB.View) under load: on PostgreSQL
	// each is a transaction of the server's too.
	ReadsPerTurn float64 `json:"reads_per_turn"`
	// HistoryMissesPerTurn is how many reads of a conversation's history
	// under load read its messages from the database, not the history
	// cache (database.history_cache_mb), per turn.
	HistoryMissesPerTurn float64 `json:"history_misses_per_turn"`
	RawCPUmsPerAppend    float64 `json:"raw_cpu_ms_per_append,omitempty"`
}

// benchAdapter stands in for a channel: it hands each reply to the bench's
// drivers, which send that conversation's next message, as a user would.
type benchAdapter struct {
	replies chan benchReply
}

type benchReply struct {
	chat, key string
	at        time.Time
}

func (b *benchAdapter) Start(ctx context.Context, _ adapters.Sink) error { <-ctx.Done(); return nil }

func (b *benchAdapter) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	select {
	case b.replies <- benchReply{chat: out.ChatID, key: out.IdempotencyKey, at: time.Now()}:
	case <-ctx.Done():
		return adapters.Sent{}, ctx.Err()
	}
	return adapters.Sent{MessageID: out.IdempotencyKey}, nil
}

// Options sizes a bench run.
type Options struct {
	Sessions   int    // concurrent conversations
	Turns      int    // turns per conversation
	Deliveries int    // messages handed to the gateway at once; 0 for one per conversation
	Database   string // a postgres:// URL; "" for SQLite in a temporary directory
	CPUProfile string // a file for a CPU profile of the turns under load
	// HistoryCacheMB sets database.history_cache_mb; nil for its default.
	HistoryCacheMB *int
}

// Bench measures the whole path in process: a daemon on a fresh database,
// Sessions conversations of Turns turns each through a channel of its own,
// against the raw durable append rate of the same database. Errors from the
// daemon go to stderr.
func Run(ctx context.Context, o Options, stderr io.Writer) (Result, error) {
	cfg := config.Default()
	dir, err := os.MkdirTemp("", "parley-bench-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	cfg.Database.URL = config.DSN(filepath.Join(dir, "parley.db"))
	if o.Database != "" {
		cfg.Database.URL = config.DSN(o.Database)
	}
	cfg.Gateway.Debounce = 0 // measure the path, not the burst window
	if o.HistoryCacheMB != nil {
		cfg.Database.HistoryCacheMB = *o.HistoryCacheMB
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ad := &benchAdapter{replies: make(chan benchReply, 64)}
	d, err := daemon.New(ctx, cfg, log, daemon.WithChannels(map[adapters.ID]adapters.Adapter{"bench": ad}))
	if err != nil {
		return Result{}, err
	}
	defer d.Close()
	if o.Database != "" {
		var n int
		if err := d.DB().Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM sessions").Scan(&n); err != nil {
			return Result{}, fmt.Errorf("check the bench database: %w", err)
		}
		if n > 0 {
			return Result{}, fmt.Errorf("the bench writes thousands of sessions and the database at --database already holds %d; point it at a scratch database or schema (e.g. add &search_path=parley_bench to the URL after CREATE SCHEMA parley_bench)", n)
		}
	}

	// The limit is measured with as many writers as the run has
	// conversations in flight, each appending to a session of its own: the
	// concurrency the turns have, which is also what lets commits batch.
	writers := min(o.Sessions, 1000)
	// The limit's writers are the instrument, not conversations of the
	// daemon's: they append through a store of their own on the same
	// database, so their sessions don't sit in the daemon's caches.
	rawStore := sessions.NewStore(d.DB(), sessions.WithActiveCache(0), sessions.WithHistoryCache(0))
	// As parley run does once started, hand back the pages only start-up
	// touched, then count the peak from here: the figure is the daemon's
	// under load, not its start-up's.
	daemon.ReleaseInitPages()
	resetPeakRSS()
	raw, err := rawAppendRate(ctx, d.DB(), rawStore, writers, max(2000, 20*writers))
	if err != nil {
		return Result{}, err
	}

	var profile *os.File
	if o.CPUProfile != "" {
		if profile, err = os.Create(o.CPUProfile); err != nil {
			return Result{}, fmt.Errorf("cpu profile: %w", err)
		}
		defer profile.Close()
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(runCtx) }()
	halt := func(err error) error {
		stop()
		if runErr := <-runDone; err == nil {
			err = runErr
		}
		return err
	}

	deliveries := o.Deliveries
	if deliveries <= 0 || deliveries > o.Sessions {
		deliveries = o.Sessions
	}
	b := &benchRun{d: d, ad: ad, convs: make([]benchConv, o.Sessions), deliveries: deliveries}
	txBefore, commitsBefore, syncsBefore := d.DB().Transactions(), d.DB().Commits(), d.DB().Syncs()
	framesBefore := walFrames(ctx, d.DB())
	cpuBefore := processCPU()
	busyBefore, commitBefore := d.DB().WriterBusy()
	_, missesBefore := d.Sessions().HistoryCacheStats()
	// Count the reads beside the daemon's own observer (its metrics).
	var reads atomic.Int64
	daemonObserver := d.Metrics().ObserveDB()
	d.DB().Observe(func(op dbutil.Op, start time.Time, took time.Duration) {
		if op == dbutil.OpRead {
			reads.Add(1)
		}
		daemonObserver(op, start, took)
	})
	if profile != nil {
		// The profile covers the turns under load, what turns/s measures.
		if err := pprof.StartCPUProfile(profile); err != nil {
			return Result{}, halt(fmt.Errorf("cpu profile: %w", err))
		}
	}
	start := time.Now()
	lat, err := b.load(ctx, o.Turns)
	if profile != nil {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return Result{}, halt(err)
	}
	elapsed := time.Since(start)
	d.DB().Observe(daemonObserver)
	cpu := processCPU() - cpuBefore
	_, misses := d.Sessions().HistoryCacheStats()
	misses -= missesBefore
	busy, commit := d.DB().WriterBusy()
	busy, commit = busy-busyBefore, commit-commitBefore
	appends, commits, syncs := d.DB().Transactions()-txBefore, d.DB().Commits()-commitsBefore, d.DB().Syncs()-syncsBefore
	frames := walFrames(ctx, d.DB()) - framesBefore
	over, wait, err := b.serial(ctx, min(o.Sessions, 1000))
	if err != nil {
		return Result{}, halt(err)
	}
	// Measure the limit again after the turns and take the mean: the
	// machine's load drifts, and both figures should see the same.
	rawAfter, err := rawAppendRate(ctx, d.DB(), rawStore, writers, max(2000, 20*writers))
	if err != nil {
		return Result{}, halt(err)
	}
	raw = raw.mean(rawAfter)
	if err := halt(nil); err != nil {
		return Result{}, err
	}

	r := Result{
		Engine: string(d.DB().Dialect), Sessions: o.Sessions, Turns: len(lat), Deliveries: deliveries,
		TurnsPerSec:   float64(len(lat)) / elapsed.Seconds(),
		OverheadP50ms: quantileMs(over, 0.50), OverheadP99ms: quantileMs(over, 0.99), OverheadMaxms: quantileMs(over, 1),
		OverheadTurns:  len(over),
		StoreWaitP50ms: quantileMs(wait, 0.50),
		LatencyP50ms:   quantileMs(lat, 0.50), LatencyP99ms: quantileMs(lat, 0.99), LatencyMaxms: quantileMs(lat, 1),
		PeakRSSMB:            peakRSSMB(),
		RawAppendPerSec:      raw.rate,
		AppendsPerTurn:       float64(appends) / float64(len(lat)),
		CommitsPerTurn:       float64(commits) / float64(len(lat)),
		RawCommitsPerAppend:  raw.commits,
		FsyncsPerTurn:        float64(syncs) / float64(len(lat)),
		RawFsyncsPerAppend:   raw.syncs,
		CPUmsPerTurn:         float64(cpu.Microseconds()) / 1000 / float64(len(lat)),
		RawCPUmsPerAppend:    raw.cpuMs,
		ReadsPerTurn:         float64(reads.Load()) / float64(len(lat)),
		HistoryMissesPerTurn: float64(misses) / float64(len(lat)),
	}
	r.LimitRatio = r.TurnsPerSec / (r.RawAppendPerSec / r.AppendsPerTurn)
	if d.DB().Dialect == dbutil.SQLite {
		r.WALFramesPerTurn = float64(frames) / float64(len(lat))
		r.RawWALFramesPerAppend = raw.frames
		r.WriterBusy, r.WriterCommit = share(busy, elapsed), share(commit, busy)
		r.RawWriterBusy, r.RawWriterCommit = raw.busy, raw.commit
	}
	return r, nil
}

// benchRun plays the users of a bench run.
type benchRun struct {
	d     *daemon.Daemon
	ad    *benchAdapter
	convs []benchConv
	// deliveries is how many goroutines deliver messages: as many as a
	// channel delivers at once.
	deliveries int
}

type benchConv struct {
	sent time.Time
	next int
}

// deliver sends conversation s its next message.
func (b *benchRun) deliver(ctx context.Context, s int) error {
	c := &b.convs[s]
	c.sent = time.Now()
	chat := "bench-" + strconv.Itoa(s)
	in := adapters.Inbound{Adapter: "bench", Surface: "bench", ChatID: chat, UserID: chat,
		MessageID: strconv.Itoa(c.next), Text: "hello number " + strconv.Itoa(c.next), Time: c.sent}
	c.next++
	return b.d.Gateway().Deliver(ctx, in)
}

// conv is the conversation a reply belongs to.
func (b *benchRun) conv(r benchReply) int {
	s, _ := strconv.Atoi(strings.TrimPrefix(r.chat, "bench-"))
	return s
}

// replyTimeout bounds the wait for any one reply.
const replyTimeout = 2 * time.Minute

// load runs turns turns in every conversation, all of them in flight at
// once. Each reply makes its conversation send the next message, as its
// user would. The messages reach the gateway through b.deliveries drivers,
// the deliveries a channel makes at once: Discord and webhooks deliver
// each conversation's message as it comes (a driver per conversation),
// Telegram's poller a batch of up to 100 updates at once. It returns each
// turn's latency, Deliver to Send.
func (b *benchRun) load(ctx context.Context, turns int) ([]time.Duration, error) {
	drivers := b.deliveries
	n := len(b.convs)
	var (
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, n*turns)
		left    = n * turns
		errOnce sync.Once
		failure error
	)
	done := make(chan struct{})
	finish := func(err error) {
		errOnce.Do(func() { failure = err; close(done) })
	}
	var wg sync.WaitGroup
	for w := range drivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := w; s < n; s += drivers {
				if err := b.deliver(ctx, s); err != nil {
					finish(err)
					return
				}
			}
			for {
				select {
				case <-done:
					return
				case r := <-b.ad.replies:
					s := b.conv(r)
					took := r.at.Sub(b.convs[s].sent)
					mu.Lock()
					lat = append(lat, took)
					left--
					last := left == 0
					mu.Unlock()
					if last {
						finish(nil)
						return
					}
					if b.convs[s].next < turns {
						if err := b.deliver(ctx, s); err != nil {
							finish(err)
							return
						}
					}
				case <-time.After(replyTimeout):
					finish(fmt.Errorf("no reply for %s; the bench stopped", replyTimeout))
					return
				}
			}
		}()
	}
	wg.Wait()
	return lat, failure
}

// serial runs n more turns one at a time and returns each turn's gateway
// overhead (Deliver to Send less the time it waited on the database) and
// its database wait. Each turn starts once the previous reply is recorded
// as sent, so no other turn's work overlaps it.
func (b *benchRun) serial(ctx context.Context, n int) (over, wait []time.Duration, err error) {
	var waits waitLog
	b.d.DB().Observe(waits.add)
	defer b.d.DB().Observe(nil)
	for i := range n {
		s := i % len(b.convs)
		waits.reset()
		if err := b.deliver(ctx, s); err != nil {
			return nil, nil, err
		}
		sent := b.convs[s].sent
		var r benchReply
		select {
		case r = <-b.ad.replies:
		case <-time.After(replyTimeout):
			return nil, nil, fmt.Errorf("no reply for %s; the bench stopped", replyTimeout)
		}
		w := waits.within(sent, r.at)
		over = append(over, r.at.Sub(sent)-w)
		wait = append(wait, w)
		if err := b.awaitRecorded(ctx, r); err != nil {
			return nil, nil, err
		}
	}
	return over, wait, nil
}

// awaitRecorded waits until the reply's send is recorded, reading
// directly so the bench's own reads stay out of the next turn's figures.
func (b *benchRun) awaitRecorded(ctx context.Context, r benchReply) error {
	for {
		var status string
		err := b.d.DB().Reader().QueryRowContext(ctx, "SELECT status FROM outbox WHERE idempotency_key = $1", r.key).Scan(&status)
		if err != nil {
			return fmt.Errorf("read the outbox: %w", err)
		}
		if status != "pending" {
			return nil
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// waitLog collects the intervals callers spent waiting on the database.
type waitLog struct {
	mu        sync.Mutex
	intervals [][2]time.Time
}

func (w *waitLog) add(_ dbutil.Op, start time.Time, took time.Duration) {
	w.mu.Lock()
	w.intervals = append(w.intervals, [2]time.Time{start, start.Add(took)})
	w.mu.Unlock()
}

func (w *waitLog) reset() {
	w.mu.Lock()
	w.intervals = w.intervals[:0]
	w.mu.Unlock()
}

// within is how much of [from, to] some caller was waiting on the
// database: the union of the intervals, clipped to it.
func (w *waitLog) within(from, to time.Time) time.Duration {
	w.mu.Lock()
	iv := slices.Clone(w.intervals)
	w.mu.Unlock()
	slices.SortFunc(iv, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
	var total time.Duration
	cur := from
	for _, x := range iv {
		lo, hi := x[0], x[1]
		if lo.Before(cur) {
			lo = cur
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			total += hi.Sub(lo)
			cur = hi
		}
	}
	return total
}

func quantileMs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000
}

// walFrames is the pages SQLite has written to its log so far (0 on
// PostgreSQL, or if the driver can't say).
func walFrames(ctx context.Context, db *dbutil.DB) int64 {
	n, err := db.WALFrames(ctx)
	if err != nil {
		return 0
	}
	return n
}

// rawRate is what rawAppendRate measures.
type rawRate struct {
	rate    float64 // durable appends per second
	frames  float64 // WAL frames per append (SQLite)
	cpuMs   float64 // process CPU per append
	busy    float64 // the writer's share of the time (SQLite)
	commit  float64 // the commits' share of the writer's time (SQLite)
	commits float64 // commits per append
	syncs   float64 // fsyncs per append
}

// mean is the mean of two measurements.
func (r rawRate) mean(o rawRate) rawRate {
	return rawRate{(r.rate + o.rate) / 2, (r.frames + o.frames) / 2, (r.cpuMs + o.cpuMs) / 2, (r.busy + o.busy) / 2, (r.commit + o.commit) / 2, (r.commits + o.commits) / 2, (r.syncs + o.syncs) / 2}
}

// share is part ÷ whole, 0 when whole is.
func share(part, whole time.Duration) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// rawAppendRate measures durable appends per second on the same database with
// the same durability, from `workers` writers at once: the physical limit a
// turn's commits share.
func rawAppendRate(ctx context.Context, db *dbutil.DB, store sessions.Store, workers, total int) (rawRate, error) {
	ids := make([]sessions.ID, workers)
	for i := range ids {
		s, _, err := store.Resolve(ctx, sessions.ChatKey("bench-raw", strconv.Itoa(i), "raw", config.DefaultAgentID), sessions.Policy{})
		if err != nil {
			return rawRate{}, err
		}
		ids[i] = s.ID
	}
	framesBefore, commitsBefore, syncsBefore := walFrames(ctx, db), db.Commits(), db.Syncs()
	cpuBefore := processCPU()
	busyBefore, commitBefore := db.WriterBusy()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range total / workers {
				if _, err := store.Append(ctx, ids[w], sessions.Message{Role: sessions.RoleUser, Content: "a raw append"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	cpu := processCPU() - cpuBefore
	busy, commit := db.WriterBusy()
	busy, commit = busy-busyBefore, commit-commitBefore
	close(errs)
	for err := range errs {
		return rawRate{}, err
	}
	n := float64(total / workers * workers)
	return rawRate{
		rate:    n / took.Seconds(),
		frames:  float64(walFrames(ctx, db)-framesBefore) / n,
		cpuMs:   float64(cpu.Microseconds()) / 1000 / n,
		busy:    share(busy, took),
		commit:  share(commit, busy),
		commits: float64(db.Commits()-commitsBefore) / n,
		syncs:   float64(db.Syncs()-syncsBefore) / n,
	}, nil
}

// processCPU is the CPU time the process has used, user and system (Linux:
// /proc/self/stat, in clock ticks of 10 ms; 0 elsewhere).
func processCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	return statCPU(b)
}

// statCPU reads the user and system CPU time from /proc/PID/stat text.
func statCPU(b []byte) time.Duration {
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// resetPeakRSS starts VmHWM again from the current resident set (Linux:
// /proc/self/clear_refs, 5).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSSMB is the process's peak resident set (VmHWM), in MB.
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return statusMB(string(b), "VmHWM:")
}
