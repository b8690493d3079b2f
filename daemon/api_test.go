package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/client"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/sessions"
)

const apiToken = "test-token-0123456789abcdef0123456789"

// The HTTP API drives a session through the whole daemon: create it, send a
// message, watch the run stream over SSE, read the reply back.
func TestAPIThroughTheDaemon(t *testing.T) {
	ctx := context.Background()
	_, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	call := func(method, path string, body any, token string) (int, map[string]any) {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, url+path, rd)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if status, out := call("GET", "/v1/sessions", nil, "wrong"); status != 401 || out["error"] == nil {
		t.Fatalf("a bad token: %d %v", status, out)
	}
	status, sess := call("POST", "/v1/sessions", map[string]any{"title": "api test"}, apiToken)
	if status != 201 && status != 200 {
		t.Fatalf("create: %d %v", status, sess)
	}
	id, _ := sess["id"].(string)
	if id == "" {
		t.Fatalf("no session id in %v", sess)
	}
	status, run := call("POST", "/v1/sessions/"+id+"/messages", map[string]any{"content": "hello over http"}, apiToken)
	if status != 202 || run["run_id"] == nil {
		t.Fatalf("send: %d %v", status, run)
	}
	// The run's events: opened with run_id, the stream replays it from the
	// start even if it finished already.
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", url+"/v1/sessions/"+id+"/events?run_id="+run["run_id"].(string), nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		types = append(types, ev.Type)
		if ev.Type == "message.delta" {
			var d struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			text.WriteString(d.Text)
		}
		if ev.Type == "turn.finished" {
			break
		}
	}
	if len(types) == 0 || types[0] != "turn.started" || types[len(types)-1] != "turn.finished" || !strings.Contains(text.String(), "hello over http") {
		t.Fatalf("events %v, text %q", types, text.String())
	}
	status, msgs := call("GET", "/v1/sessions/"+id+"/messages", nil, apiToken)
	if status != 200 || !strings.Contains(toJSON(msgs), "hello over http") {
		t.Fatalf("messages: %d %v", status, msgs)
	}
	if status, st := call("GET", "/v1/sessions/"+id+"/status", nil, apiToken); status != 200 || st["state"] == nil {
		t.Fatalf("status: %d %v", status, st)
	}
	// A model for one message answers that message (echo under another
	// name here: a provider without a key is not configured).
	if status, run := call("POST", "/v1/sessions/"+id+"/messages", map[string]any{"content": "again", "model": "echo/other"}, apiToken); status != 202 {
		t.Fatalf("send with a model: %d %v", status, run)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, msgs := call("GET", "/v1/sessions/"+id+"/messages", nil, apiToken)
		if strings.Contains(toJSON(msgs), `"model":"echo/other"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply by the message's model: %v", toJSON(msgs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sendTwoAtOnce starts a daemon that answers messages sent within 400 ms
// of each other together, and sends it two to a new session, returning
// the client, the session's id and the two run ids.
func sendTwoAtOnce(t *testing.T, ctx context.Context, first, second map[string]any) (*client.Client, string, [2]string) {
	t.Helper()
	return sendTwoAtOnceTo(t, ctx, nil, first, second)
}

// sendTwoAtOnceTo is sendTwoAtOnce with prepare run on the new session
// first.
func sendTwoAtOnceTo(t *testing.T, ctx context.Context, prepare func(d *Daemon, id sessions.ID), first, second map[string]any) (*client.Client, string, [2]string) {
	t.Helper()
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 400ms\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	t.Cleanup(stop)
	c := &client.Client{Base: url, Token: apiToken}
	var sess struct {
		ID string `json:"id"`
	}
	if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": "two at once"}, &sess); err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(d, sessions.ID(sess.ID))
	}
	var runs [2]string
	for i, body := range []map[string]any{first, second} {
		var run struct {
			RunID string `json:"run_id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/messages", body, &run); err != nil {
			t.Fatal(err)
		}
		runs[i] = run.RunID
	}
	return c, sess.ID, runs
}

// Two messages sent within the debounce window are answered by one run:
// the stream asked for either one's run id shows that run's reply, and
// the run says which messages it answers.
func TestAPIMessagesAnsweredTogether(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, sess, runs := sendTwoAtOnce(t, ctx, map[string]any{"content": "first of two"}, map[string]any{"content": "second of two"})
	if runs[0] == runs[1] {
		t.Fatalf("both sends returned run id %s", runs[0])
	}
	for i := range runs {
		var out strings.Builder
		if err := c.Stream(ctx, sess, runs[i], &out); err != nil {
			t.Fatalf("stream of send %d: %v", i, err)
		}
		if !strings.Contains(out.String(), "second of two") {
			t.Fatalf("stream of send %d shows %q; want the reply to both", i, out.String())
		}
	}
	// The run's turn.started names both messages, under the first's id.
	resp, err := c.Request(ctx, "GET", "/v1/sessions/"+sess+"/events?run_id="+runs[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			RunID string `json:"run_id"`
			Data  struct {
				RunIDs []string `json:"run_ids"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "turn.started" {
			t.Fatalf("the replay begins with %s, want turn.started", ev.Type)
		}
		if ev.RunID != runs[0] || fmt.Sprint(ev.Data.RunIDs) != fmt.Sprint([]string{runs[0], runs[1]}) {
			t.Fatalf("turn.started of run %s answers %v; want run %s answering both", ev.RunID, ev.Data.RunIDs, runs[0])
		}
		return
	}
	t.Fatal("the stream ended without a turn.started")
}

// A run answering two messages that fails before it starts (the session's
// model override names a provider nobody has: the API refuses one, so it
// is set in the store, as an older parley could have) ends both messages'
// streams; a chat command sent as a message is refused, with the route
// that does its work.
func TestAPIMessagesThatGetNoReply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	badModel := func(d *Daemon, id sessions.ID) {
		model := "nosuch/model"
		if _, err := d.sessions.Update(ctx, id, sessions.Update{Model: &model}); err != nil {
			t.Fatal(err)
		}
	}
	c, sess, runs := sendTwoAtOnceTo(t, ctx, badModel, map[string]any{"content": "first"}, map[string]any{"content": "second"})
	for i := range runs {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		var out strings.Builder
		err := c.Stream(sctx, sess, runs[i], &out)
		scancel()
		if err != nil {
			t.Fatalf("the stream of send %d didn't end: %v (it showed %q)", i, err, out.String())
		}
	}
	err := c.Do(ctx, "POST", "/v1/sessions/"+sess+"/messages", map[string]any{"content": "/status"}, nil)
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "GET /v1/sessions/{id}/status") {
		t.Fatalf("/status as a message: %v", err)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// /metrics is open, and counts what the daemon did.
func TestMetricsEndpoint(t *testing.T) {
	ctx := context.Background()
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\n", apiOnly)
	defer stop()
	in := adapters.Inbound{Adapter: "api", Surface: "api", ChatID: "m1", UserID: "u", MessageID: "1", Text: "count me", Time: time.Now()}
	if err := d.gw.Deliver(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := d.gw.Deliver(ctx, in); err != nil { // a redelivery
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		text := scrapeMetrics(t, url)
		if strings.Contains(text, `parley_turns_total{agent="default",outcome="ok"} 1`) &&
			strings.Contains(text, "parley_inbound_duplicates_dropped_total 1") && strings.Contains(text, "parley_store_wait_duration_seconds") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics after a turn and a redelivery:\n%s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Sixty messages sent to one session at once: each either gets a 202 with
// a run id whose run finishes on the event stream, or a 429 saying the
// queue is full, with no run id; never a 202 for a message that won't run.
func TestAPIQueueFullIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	model := llmtest.NewOpenAIEcho(t, 20*time.Millisecond)
	_, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\n  queue_cap: 5\nhttp:\n  tokens: [\""+apiToken+"\"]\n"+
		model.ConfigYAML()+"agents:\n  - id: default\n    model: openai/gpt-test\n", apiOnly)
	defer stop()
	c := &client.Client{Base: url, Token: apiToken}
	var sess struct{ ID string }
	if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": "burst"}, &sess); err != nil {
		t.Fatal(err)
	}
	const n = 60
	type result struct {
		status int
		runID  string
		body   string
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(map[string]any{"content": fmt.Sprintf("message %d", i)})
			req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/sessions/"+sess.ID+"/messages", bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer "+apiToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var out struct {
				RunID string `json:"run_id"`
			}
			raw, _ := io.ReadAll(resp.Body)
			_ = json.Unmarshal(raw, &out)
			results[i] = result{resp.StatusCode, out.RunID, string(raw)}
			if resp.StatusCode == http.StatusAccepted && out.RunID != "" {
				// As the web chat does: follow the run the 202 named.
				if err := c.Stream(ctx, sess.ID, out.RunID, io.Discard); err != nil {
					t.Errorf("message %d: its run %s never finished on the stream: %v", i, out.RunID, err)
				}
			}
		}()
	}
	wg.Wait()
	accepted, refused := 0, 0
	for i, r := range results {
		switch r.status {
		case http.StatusAccepted:
			accepted++
			if r.runID == "" {
				t.Fatalf("message %d: 202 without a run id: %s", i, r.body)
			}
		case http.StatusTooManyRequests:
			refused++
			if r.runID != "" || !strings.Contains(r.body, "queue_full") || !strings.Contains(r.body, "waiting") {
				t.Fatalf("message %d: a refusal should say why and carry no run id: %s", i, r.body)
			}
		default:
			t.Fatalf("message %d: %d %s", i, r.status, r.body)
		}
	}
	if refused == 0 || accepted < 5 {
		t.Fatalf("%d accepted, %d refused; want the queue's cap of 5 to refuse some of 60", accepted, refused)
	}
	t.Logf("%d accepted and answered, %d refused", accepted, refused)
}

// database.history_cache_mb reaches the session store: with the default, a
// chat's later turns read its history from memory, as
// parley_history_cache_reads_total shows; with 0, every one reads it from
// the database and nothing is kept.
func TestHistoryCacheSetting(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		cached     bool
	}{
		{"default", "", true},
		{"off", "  history_cache_mb: 0\n", false}, // under database:, which testDaemon's config opens with
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, url, stop := testDaemon(t, tc.yaml+"gateway:\n  debounce: 0s\n", apiOnly)
			defer stop()
			const turns = 4
			var text string
			for i := range turns {
				in := adapters.Inbound{Adapter: "api", Surface: "api", ChatID: "h1", UserID: "u", MessageID: fmt.Sprint(i),
					Text: fmt.Sprint("turn ", i), Time: time.Now()}
				if err := d.gw.Deliver(ctx, in); err != nil {
					t.Fatal(err)
				}
				text = waitMetric(t, url, fmt.Sprintf(`parley_turns_total{agent="default",outcome="ok"} %d`, i+1))
			}
			hit := metricValue(t, text, `parley_history_cache_reads_total{result="hit"}`)
			miss := metricValue(t, text, `parley_history_cache_reads_total{result="miss"}`)
			if tc.cached {
				if hit < turns-1 || d.sessions.CachedHistories() == 0 {
					t.Fatalf("after %d turns in one chat: %v hits, %v misses, %d histories kept; want a hit for every turn after the first",
						turns, hit, miss, d.sessions.CachedHistories())
				}
			} else if hit != 0 || miss < turns || d.sessions.CachedHistories() != 0 {
				t.Fatalf("with the cache off, after %d turns: %v hits, %v misses, %d histories kept; want only misses, none kept",
					turns, hit, miss, d.sessions.CachedHistories())
			}
		})
	}
}

// waitMetric scrapes url's /metrics until it has the line want, and
// returns that scrape.
func waitMetric(t *testing.T, url, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		text := scrapeMetrics(t, url)
		for l := range strings.Lines(text) {
			if strings.TrimSpace(l) == want {
				return text
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never had %q:\n%s", want, text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scrapeMetrics is url's /metrics, which must answer 200.
func scrapeMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b.String())
	}
	return b.String()
}

// metricValue is the value of the series named (with its labels) series
// in a scrape.
func metricValue(t *testing.T, scrape, series string) float64 {
	t.Helper()
	for l := range strings.Lines(scrape) {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return v
		}
	}
	t.Fatalf("no %s in the scrape:\n%s", series, scrape)
	return 0
}
