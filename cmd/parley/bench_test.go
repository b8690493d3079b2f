package main

import (
	"context"
	"encoding/json"
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
		"overhead_turns", "store_wait_p50_ms", "latency_p50_ms", "latency_p99_ms", "latency_max_ms"} {
		v, ok := r[k]
		if !ok {
			t.Errorf("missing %q", k)
			continue
		}
		if f, isNum := v.(float64); isNum && f <= 0 {
			t.Errorf("%s = %v, want a positive figure", k, v)
		}
	}
	if r["engine"] != "sqlite" || r["turns"] != float64(6) || r["sessions"] != float64(3) || r["overhead_turns"] != float64(3) {
		t.Fatalf("run shape: %v", r)
	}
}
