package main

import (
	"context"
	"encoding/json"
	"flag"
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
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/sessions"
)

// benchResult is what `parley bench --json` prints.
type benchResult struct {
	Engine          string  `json:"engine"`
	Sessions        int     `json:"sessions"`
	Turns           int     `json:"turns"`
	TurnsPerSec     float64 `json:"turns_per_sec"`
	OverheadP50ms   float64 `json:"overhead_p50_ms"`
	OverheadP99ms   float64 `json:"overhead_p99_ms"`
	OverheadMaxms   float64 `json:"overhead_max_ms"`
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	RawAppendPerSec float64 `json:"raw_append_per_sec"`
	AppendsPerTurn  float64 `json:"appends_per_turn"`
	LimitRatio      float64 `json:"limit_ratio"`
}

// benchAdapter stands in for a channel: it hands each reply to the bench's
// drivers, which send that conversation's next message, as a user would.
type benchAdapter struct {
	replies chan benchReply
}

type benchReply struct {
	chat string
	at   time.Time
}

func (b *benchAdapter) Start(ctx context.Context, _ adapters.Sink) error { <-ctx.Done(); return nil }

func (b *benchAdapter) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	select {
	case b.replies <- benchReply{chat: out.ChatID, at: time.Now()}:
	case <-ctx.Done():
		return adapters.Sent{}, ctx.Err()
	}
	return adapters.Sent{MessageID: out.IdempotencyKey}, nil
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	nSessions := fs.Int("sessions", 1000, "concurrent conversations")
	nTurns := fs.Int("turns", 10, "turns per conversation, each sent after the previous reply")
	database := fs.String("database", "", "a postgres:// URL to measure PostgreSQL (default: SQLite in a temporary directory)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	if _, err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *nSessions < 1 || *nTurns < 1 {
		return fmt.Errorf("%w: --sessions and --turns must be at least 1", errUsage)
	}
	cfg := config.Default()
	dir, err := os.MkdirTemp("", "parley-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Database.URL = config.DSN(filepath.Join(dir, "parley.db"))
	if *database != "" {
		cfg.Database.URL = config.DSN(*database)
	}
	cfg.Gateway.Debounce = 0 // measure the path, not the burst window
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ad := &benchAdapter{replies: make(chan benchReply, 64)}
	d, err := startDaemon(ctx, cfg, log, map[adapters.ID]adapters.Adapter{"bench": ad})
	if err != nil {
		return err
	}
	defer d.close()
	if *database != "" {
		var n int
		if err := d.db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM sessions").Scan(&n); err != nil {
			return fmt.Errorf("check the bench database: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("the bench writes thousands of sessions and the database at --database already holds %d; point it at a scratch database or schema (e.g. add &search_path=parley_bench to the URL after CREATE SCHEMA parley_bench)", n)
		}
	}

	raw, err := rawAppendRate(ctx, d.sessions, min(*nSessions, 64), 2000)
	if err != nil {
		return err
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- d.run(runCtx) }()

	// A few drivers play every user, as a channel's few connections would:
	// each reply makes its conversation send the next message.
	txBefore := d.db.Transactions()
	type conv struct {
		sent time.Time
		next int
		lat  []time.Duration
	}
	convs := make([]conv, *nSessions)
	var left sync.WaitGroup
	left.Add(*nSessions)
	deliver := func(s int) error {
		c := &convs[s]
		c.sent = time.Now()
		chat := "bench-" + strconv.Itoa(s)
		in := adapters.Inbound{Adapter: "bench", Surface: "bench", ChatID: chat, UserID: chat,
			MessageID: strconv.Itoa(c.next), Text: "hello number " + strconv.Itoa(c.next), Time: c.sent}
		c.next++
		return d.gw.Deliver(ctx, in)
	}
	errs := make(chan error, 1)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	start := time.Now()
	var drivers sync.WaitGroup
	const nDrivers = 4
	for w := range nDrivers {
		drivers.Add(1)
		go func() {
			defer drivers.Done()
			for s := w; s < *nSessions; s += nDrivers {
				if err := deliver(s); err != nil {
					fail(err)
					return
				}
			}
			for {
				select {
				case r := <-ad.replies:
					s, _ := strconv.Atoi(strings.TrimPrefix(r.chat, "bench-"))
					c := &convs[s]
					c.lat = append(c.lat, r.at.Sub(c.sent))
					if c.next == *nTurns {
						left.Done()
						continue
					}
					if err := deliver(s); err != nil {
						fail(err)
						return
					}
				case <-runCtx.Done():
					return
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { left.Wait(); close(finished) }()
	select {
	case <-finished:
	case err := <-errs:
		stop()
		drivers.Wait()
		<-runDone
		return err
	case <-time.After(10 * time.Minute):
		stop()
		drivers.Wait()
		<-runDone
		return fmt.Errorf("the bench got no reply to some messages within 10 minutes")
	}
	elapsed := time.Since(start)
	appends := d.db.Transactions() - txBefore
	stop()
	drivers.Wait()
	if err := <-runDone; err != nil {
		return err
	}

	var all []time.Duration
	for _, c := range convs {
		all = append(all, c.lat...)
	}
	slices.Sort(all)
	turns := len(all)
	ms := func(q float64) float64 {
		return float64(all[int(q*float64(len(all)-1))].Microseconds()) / 1000
	}
	r := benchResult{
		Engine: string(d.db.Dialect), Sessions: *nSessions, Turns: turns,
		TurnsPerSec:   float64(turns) / elapsed.Seconds(),
		OverheadP50ms: ms(0.50), OverheadP99ms: ms(0.99), OverheadMaxms: ms(1),
		PeakRSSMB:       peakRSSMB(),
		RawAppendPerSec: raw,
		AppendsPerTurn:  float64(appends) / float64(turns),
	}
	r.LimitRatio = r.TurnsPerSec / (r.RawAppendPerSec / r.AppendsPerTurn)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	fmt.Fprintf(stdout, "engine            %s\n", r.Engine)
	fmt.Fprintf(stdout, "turns             %d (%d sessions × %d)\n", r.Turns, r.Sessions, *nTurns)
	fmt.Fprintf(stdout, "turns/s           %.0f\n", r.TurnsPerSec)
	fmt.Fprintf(stdout, "overhead per turn p50 %.2f ms · p99 %.2f ms · max %.2f ms (echo model: the whole path, Deliver to Send)\n", r.OverheadP50ms, r.OverheadP99ms, r.OverheadMaxms)
	fmt.Fprintf(stdout, "peak RSS          %.1f MB\n", r.PeakRSSMB)
	fmt.Fprintf(stdout, "raw durable appends/s %.0f (same store, same durability)\n", r.RawAppendPerSec)
	fmt.Fprintf(stdout, "appends per turn  %.1f (durable write transactions)\n", r.AppendsPerTurn)
	fmt.Fprintf(stdout, "limit ratio       %.2f (turn rate ÷ (raw rate ÷ appends per turn))\n", r.LimitRatio)
	return nil
}

// rawAppendRate measures durable appends per second on the same store with
// the same durability, from `workers` writers at once: the physical limit a
// turn's commits share.
func rawAppendRate(ctx context.Context, store sessions.Store, workers, total int) (float64, error) {
	ids := make([]sessions.ID, workers)
	for i := range ids {
		s, _, err := store.Resolve(ctx, sessions.ChatKey("bench-raw", strconv.Itoa(i), "raw", config.DefaultAgentID), sessions.Policy{})
		if err != nil {
			return 0, err
		}
		ids[i] = s.ID
	}
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
	close(errs)
	for err := range errs {
		return 0, err
	}
	return float64(total/workers*workers) / time.Since(start).Seconds(), nil
}

// peakRSSMB is the process's peak resident set (VmHWM), in MB.
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}
