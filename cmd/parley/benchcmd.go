package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/parleyd/parley/bench"
)

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	nSessions := fs.Int("sessions", 1000, "concurrent conversations")
	nTurns := fs.Int("turns", 10, "turns per conversation, each sent after the previous reply")
	deliveries := fs.Int("deliveries", 0, "messages handed to the gateway at once, as a channel's parallel deliveries (default: one per conversation, as Discord and webhooks deliver)")
	database := fs.String("database", "", "a postgres:// URL to measure PostgreSQL (default: SQLite in a temporary directory)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the turns under load to this file (go tool pprof reads it)")
	idle := fs.Bool("idle", false, "instead, start `parley run` with no channels and measure exec-to-ready time and idle RSS")
	runs := fs.Int("runs", 5, "with --idle: how many starts (the median is reported)")
	binary := fs.String("binary", "", "with --idle: the parley binary to start (default: this one)")
	historyMB := fs.Int("history-cache-mb", -1, "the history cache's size, as database.history_cache_mb (default: its default, 16)")
	burst := fs.Int("burst", 0, "with --idle: then send this many API messages and read RSS for a minute after them")
	if _, err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *idle {
		if *runs < 1 {
			return fmt.Errorf("%w: --runs must be at least 1", errUsage)
		}
		if *burst < 0 {
			return fmt.Errorf("%w: --burst must be 0 or more", errUsage)
		}
		return bench.Idle(ctx, *binary, *runs, *burst, *asJSON, stdout)
	}
	if *nSessions < 1 || *nTurns < 1 || *deliveries < 0 {
		return fmt.Errorf("%w: --sessions and --turns must be at least 1, and --deliveries 0 or more", errUsage)
	}
	if *historyMB > 4096 {
		return fmt.Errorf("%w: --history-cache-mb must be 4096 or less", errUsage)
	}
	var history *int // its default
	if *historyMB >= 0 {
		history = historyMB
	}
	r, err := bench.Run(ctx, bench.Options{Sessions: *nSessions, Turns: *nTurns, Deliveries: *deliveries, Database: *database, CPUProfile: *cpuProfile,
		HistoryCacheMB: history}, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	fmt.Fprintf(stdout, "engine            %s\n", r.Engine)
	fmt.Fprintf(stdout, "turns             %d (%d sessions × %d, all in flight at once; %d delivered at a time)\n", r.Turns, r.Sessions, *nTurns, r.Deliveries)
	fmt.Fprintf(stdout, "turns/s           %.0f\n", r.TurnsPerSec)
	fmt.Fprintf(stdout, "latency           p50 %.1f ms · p99 %.1f ms · max %.1f ms (Deliver to Send, under that load)\n", r.LatencyP50ms, r.LatencyP99ms, r.LatencyMaxms)
	fmt.Fprintf(stdout, "gateway overhead  p50 %.3f ms · p99 %.3f ms · max %.3f ms (Deliver to Send less database waits, %d turns one at a time; they waited p50 %.2f ms on the database)\n",
		r.OverheadP50ms, r.OverheadP99ms, r.OverheadMaxms, r.OverheadTurns, r.StoreWaitP50ms)
	fmt.Fprintf(stdout, "peak RSS          %.1f MB\n", r.PeakRSSMB)
	fmt.Fprintf(stdout, "raw durable appends/s %.0f (same database, same durability)\n", r.RawAppendPerSec)
	fmt.Fprintf(stdout, "appends per turn  %.1f (durable write transactions) · %.1f reads (of which %.2f read a history the cache didn't hold)\n",
		r.AppendsPerTurn, r.ReadsPerTurn, r.HistoryMissesPerTurn)
	fmt.Fprintf(stdout, "limit ratio       %.2f (turn rate ÷ (raw rate ÷ appends per turn))\n", r.LimitRatio)
	fmt.Fprintf(stdout, "commits           %.3f per turn · %.4f per raw append", r.CommitsPerTurn, r.RawCommitsPerAppend)
	if r.FsyncsPerTurn > 0 {
		fmt.Fprintf(stdout, " (fsyncs: %.3f per turn · %.4f per raw append, each covering the commits made while the last one ran)", r.FsyncsPerTurn, r.RawFsyncsPerAppend)
	}
	fmt.Fprintln(stdout)
	if r.CPUmsPerTurn > 0 {
		fmt.Fprintf(stdout, "CPU               %.3f ms per turn · %.3f ms per raw append (the whole process)\n", r.CPUmsPerTurn, r.RawCPUmsPerAppend)
	}
	if r.WALFramesPerTurn > 0 {
		fmt.Fprintf(stdout, "WAL frames        %.1f per turn · %.2f per raw append (pages written to SQLite's log)\n", r.WALFramesPerTurn, r.RawWALFramesPerAppend)
	}
	if r.WriterBusy > 0 {
		fmt.Fprintf(stdout, "SQLite writer     busy %.0f%% of the turns' time (%.0f%% of that in commits) · %.0f%% of the raw appends' (%.0f%%)\n",
			100*r.WriterBusy, 100*r.WriterCommit, 100*r.RawWriterBusy, 100*r.RawWriterCommit)
	}
	return nil
}
