package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

func TestBenchPrintsEveryFigure(t *testing.T) {
	code, out, errOut := parley(t, context.Background(), "bench", "--sessions", "3", "--turns", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %q", out)
	}
	for _, k := range []string{"turns_per_sec", "overhead_p50_ms", "overhead_p99_ms", "overhead_max_ms", "peak_rss_mb",
		"raw_append_per_sec", "appends_per_turn", "limit_ratio", "engine", "sessions", "turns",
		"overhead_turns", "store_wait_p50_ms", "latency_p50_ms", "latency_p99_ms", "latency_max_ms",
		"wal_frames_per_turn", "raw_wal_frames_per_append", "commits_per_turn", "raw_commits_per_append",
		"writer_busy", "writer_commit", "raw_writer_busy", "raw_writer_commit",
		"deliveries", "fsyncs_per_turn", "raw_fsyncs_per_append"} {
		v, ok := r[k]
		if !ok {
			t.Errorf("missing %q", k)
			continue
		}
		if f, isNum := v.(float64); isNum && f <= 0 {
			t.Errorf("%s = %v, want a positive figure", k, v)
		}
	}
	// A commit serves one transaction or more, and an fsync one commit or
	// more: never more commits than transactions, nor fsyncs than commits.
	if c, a := r["commits_per_turn"].(float64), r["appends_per_turn"].(float64); c > a {
		t.Errorf("%v commits per turn for %v transactions", c, a)
	}
	if f, c := r["fsyncs_per_turn"].(float64), r["commits_per_turn"].(float64); f > c {
		t.Errorf("%v fsyncs per turn for %v commits", f, c)
	}
	// By default every conversation delivers its next message itself.
	if d := r["deliveries"].(float64); d != 3 {
		t.Errorf("%v deliveries at a time for 3 conversations, want 3", d)
	}
	for _, k := range []string{"writer_busy", "writer_commit", "raw_writer_busy", "raw_writer_commit", "raw_commits_per_append"} {
		if f, _ := r[k].(float64); f > 1.01 {
			t.Errorf("%s = %v, want a share of at most 1", k, f)
		}
	}
	if r["engine"] != "sqlite" || r["turns"] != float64(6) || r["sessions"] != float64(3) || r["overhead_turns"] != float64(3) {
		t.Fatalf("run shape: %v", r)
	}
	// Each conversation began in this run, so the history cache holds
	// every history from its first turn on.
	if m, ok := r["history_misses_per_turn"].(float64); !ok || m != 0 {
		t.Errorf("history_misses_per_turn = %v with the default cache, want 0", r["history_misses_per_turn"])
	}
}

// --history-cache-mb sizes the daemon's history cache: with none, every
// turn reads its history from the database.
func TestBenchHistoryCacheFlag(t *testing.T) {
	code, out, errOut := parley(t, context.Background(), "bench", "--sessions", "3", "--turns", "2", "--history-cache-mb", "0", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		Misses float64 `json:"history_misses_per_turn"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %q", out)
	}
	if r.Misses < 1 {
		t.Fatalf("history_misses_per_turn = %v with no cache, want at least 1", r.Misses)
	}
	if code, _, errOut := parley(t, context.Background(), "bench", "--history-cache-mb", "5000"); code == 0 || !strings.Contains(errOut, "--history-cache-mb must be 4096 or less") {
		t.Fatalf("--history-cache-mb 5000: exit %d, %q", code, errOut)
	}
}

// The idle figures come from starting the real binary: a first start on a
// new database, then restarts on it.
func TestBenchIdleStartsTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	cmd := exec.Command(bin, "bench", "--idle", "--runs", "2", "--json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("parley bench --idle: %v\n%s", err, out)
	}
	var r struct {
		Runs          int       `json:"runs"`
		FirstReadyMs  float64   `json:"first_start_ready_ms"`
		FirstRSS      float64   `json:"first_start_idle_rss_mb"`
		ReadyMs       []float64 `json:"ready_ms"`
		ReadyMedian   float64   `json:"ready_ms_median"`
		IdleRSS       []float64 `json:"idle_rss_mb"`
		IdleRSSMedian float64   `json:"idle_rss_mb_median"`
		Peak          []float64 `json:"startup_peak_rss_mb"`
		CPU           []float64 `json:"cpu_to_idle_ms"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("not JSON: %q", out)
	}
	if r.Runs != 2 || len(r.ReadyMs) != 2 || len(r.IdleRSS) != 2 || r.FirstReadyMs <= 0 || r.FirstRSS <= 0 {
		t.Fatalf("figures: %+v", r)
	}
	// A live Go daemon holds megabytes, not bytes or gigabytes.
	for _, rss := range append(r.IdleRSS, r.FirstRSS) {
		if rss < 1 || rss > 1024 {
			t.Fatalf("idle RSS %.1f MB is not a real reading", rss)
		}
	}
	// The start-up peak is at least the idle resident set, and starting
	// costs some CPU, not none and not seconds.
	if len(r.Peak) != 2 || len(r.CPU) != 2 {
		t.Fatalf("peaks %v, CPU %v", r.Peak, r.CPU)
	}
	for i := range r.Peak {
		if r.Peak[i] < r.IdleRSS[i] || r.CPU[i] <= 0 || r.CPU[i] > 10000 {
			t.Fatalf("run %d: peak %.1f MB against idle %.1f MB, CPU %.1f ms", i, r.Peak[i], r.IdleRSS[i], r.CPU[i])
		}
	}
	if r.ReadyMedian != (r.ReadyMs[0]+r.ReadyMs[1])/2 {
		t.Fatalf("median of %v = %v", r.ReadyMs, r.ReadyMedian)
	}
}
