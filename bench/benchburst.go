package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// burstResult is the --burst part of `parley bench --idle`: the daemon's
// resident set idle, at the end of a burst of API messages, and after it.
type burstResult struct {
	Messages  int            `json:"messages"`
	Sessions  int            `json:"sessions"`
	Seconds   float64        `json:"burst_seconds"`
	IdleRSSMB float64        `json:"idle_rss_mb"`
	EndRSSMB  float64        `json:"end_rss_mb"`
	PeakRSSMB float64        `json:"peak_rss_mb"`
	After     []burstReading `json:"after"`
	// What the last reading holds: anonymous memory (the Go heap, stacks,
	// SQLite's caches) apart from the binary's mapped pages, and the Go
	// heap in use as the daemon's /metrics reports it.
	AfterAnonMB     float64 `json:"after_anon_mb"`
	AfterHeapUseMB  float64 `json:"after_heap_inuse_mb"`
	AfterHeapLiveMB float64 `json:"after_heap_alloc_mb"`
}

// burstReading is the resident set some seconds after a burst.
type burstReading struct {
	Seconds int     `json:"s"`
	RSSMB   float64 `json:"rss_mb"`
}

// burstSessions is how many API sessions a burst spreads its messages
// over; each gets its share at once, within the gateway's queue cap.
const burstSessions = 50

// burstAnswerWait is how long a burst's message may wait for its answer.
const burstAnswerWait = 30 * time.Second

// burstAfter are the moments after a burst at which the resident set is
// read.
var burstAfter = []int{5, 10, 20, 30, 45, 60}

// benchBurst starts `parley run` with the API on and no channels, reads its
// idle RSS, sends messages over the API (the echo model answers each),
// waits until every one is answered, then reads RSS for a minute.
func benchBurst(ctx context.Context, exe, dir string, messages int) (burstResult, error) {
	r := burstResult{Messages: messages, Sessions: min(burstSessions, messages)}
	tok := make([]byte, 32)
	_, _ = rand.Read(tok)
	token := hex.EncodeToString(tok)
	p, err := startRun(ctx, exe, dir, "burst", token)
	if err != nil {
		return r, err
	}
	defer p.stop()
	api := burstClient{base: "http://" + p.addr, token: token, http: &http.Client{Timeout: 30 * time.Second}}
	time.Sleep(idleSettle)
	pid := p.cmd.Process.Pid
	idle, err := readIdle(pid)
	if err != nil {
		return r, err
	}
	r.IdleRSSMB = idle.rss

	ids := make([]string, r.Sessions)
	for i := range ids {
		var s struct {
			ID string `json:"id"`
		}
		if err := api.call(ctx, "POST", "/v1/sessions", map[string]any{}, &s); err != nil {
			return r, fmt.Errorf("create a session: %w", err)
		}
		ids[i] = s.ID
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for i, id := range ids {
		n := messages / len(ids)
		if i < messages%len(ids) {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- api.converse(ctx, id, n)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return r, err
		}
	}
	r.Seconds = time.Since(start).Seconds()
	end, err := readIdle(pid)
	if err != nil {
		return r, err
	}
	r.EndRSSMB, r.PeakRSSMB = end.rss, end.peak
	done := time.Now()
	for _, s := range burstAfter {
		time.Sleep(time.Until(done.Add(time.Duration(s) * time.Second)))
		at, err := readIdle(pid)
		if err != nil {
			return r, err
		}
		r.After = append(r.After, burstReading{s, at.rss})
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); err == nil {
		r.AfterAnonMB = statusMB(string(b), "RssAnon:")
	}
	r.AfterHeapUseMB, r.AfterHeapLiveMB = api.metricMB(ctx, "go_memstats_heap_inuse_bytes"), api.metricMB(ctx, "go_memstats_heap_alloc_bytes")
	return r, nil
}

// metricMB reads one gauge, in bytes, from the daemon's /metrics, in MB
// (0 when it can't).
func (c burstClient) metricMB(ctx context.Context, name string) float64 {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f / (1 << 20)
		}
	}
	return 0
}

type burstClient struct {
	base, token string
	http        *http.Client
}

func (c burstClient) call(ctx context.Context, method, path string, in, out any) error {
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, &body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// converse sends n messages to a session, each once the previous one is
// answered, as a person does: the session's message count says so (a
// user message and its answer each).
func (c burstClient) converse(ctx context.Context, id string, n int) error {
	for i := range n {
		if err := c.call(ctx, "POST", "/v1/sessions/"+id+"/messages", map[string]any{"content": "message " + strconv.Itoa(i)}, nil); err != nil {
			return err
		}
		deadline := time.Now().Add(burstAnswerWait)
		for {
			var s struct {
				MessageCount int `json:"message_count"`
			}
			if err := c.call(ctx, "GET", "/v1/sessions/"+id, nil, &s); err != nil {
				return err
			}
			if s.MessageCount >= 2*(i+1) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("message %d of session %s had no answer within %s; the daemon's log (log.level: error in its config) says why", i+1, id, burstAnswerWait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	return nil
}
