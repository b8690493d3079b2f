package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/signing"
)

// BenchmarkWebhookLoadRSS runs parley as its own process under a steady
// webhook load (signed async deliveries from 8 clients at
// PARLEY_BENCH_RATE a second, default 125, each answered by the echo
// model) for PARLEY_BENCH_DURATION (default 5m), and reports its
// RSS once warmed up and at the end: flat within 20% is the target. Run
// it once:
//
//	go test -run '^$' -bench BenchmarkWebhookLoadRSS -benchtime 1x ./cmd/parley/
func BenchmarkWebhookLoadRSS(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads parley's memory from /proc/<pid>/status, which only Linux has")
	}
	duration := 5 * time.Minute
	if v := os.Getenv("PARLEY_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("PARLEY_BENCH_DURATION=%q: %v", v, err)
		}
		duration = d
	}
	rate := 125
	if v := os.Getenv("PARLEY_BENCH_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("PARLEY_BENCH_RATE=%q: want deliveries a second, such as 125", v)
		}
		rate = n
	}
	p, addr := startParleyHTTP(b, slowClientConfig(b.TempDir()))
	url := "http://" + addr + "/hooks/ci"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}
	var sent, failed atomic.Int64
	post := func(i int64) {
		body := []byte(fmt.Sprintf(`{"repo":"r%d"}`, i))
		ts, sig := signing.Sign(hookSecret, time.Now(), body)
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("X-Parley-Timestamp", ts)
		req.Header.Set("X-Parley-Signature", sig)
		resp, err := client.Do(req)
		if err != nil {
			failed.Add(1)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			failed.Add(1)
			return
		}
		sent.Add(1)
	}
	stop := make(chan struct{})
	due := make(chan struct{}, 8)
	go func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				select {
				case due <- struct{}{}:
				default: // the clients are behind: the rate is what parley takes
				}
			}
		}
	}()
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-due:
					post(seq.Add(1))
				}
			}
		}()
	}
	b.ResetTimer()
	// Warm up for 20 s (or a tenth of a short run), then measure.
	warm := min(20*time.Second, duration/10)
	time.Sleep(warm)
	start, startSent := rss(b, p.pid), sent.Load()
	t0 := time.Now()
	peak := start
	for time.Since(t0) < duration {
		time.Sleep(min(30*time.Second, duration/10))
		v := rss(b, p.pid)
		peak = max(peak, v)
		b.Logf("%5.0fs: RSS %.1f MB, %d deliveries accepted, %d failed", time.Since(t0).Seconds(), float64(v)/(1<<20), sent.Load(), failed.Load())
	}
	end := rss(b, p.pid)
	close(stop)
	wg.Wait()
	b.StopTimer()
	elapsed := time.Since(t0)
	b.ReportMetric(float64(start)/(1<<20), "rss-start-MB")
	b.ReportMetric(float64(end)/(1<<20), "rss-end-MB")
	b.ReportMetric(float64(peak)/(1<<20), "rss-peak-MB")
	b.ReportMetric(100*float64(end-start)/float64(start), "rss-growth-%")
	b.ReportMetric(float64(sent.Load()-startSent)/elapsed.Seconds(), "deliveries/s")
	if failed.Load() > 0 {
		b.Errorf("%d deliveries failed", failed.Load())
	}
	p.stop(60 * time.Second)
}
