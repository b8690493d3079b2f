package main

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// A request passed to the replica running its session, when that replica
// has lost its database (frozen: nothing fails, nothing answers), is
// answered 503 with Retry-After within seconds, not held for the whole
// outage; the client's retry lands on the replica that took the session
// over.
func TestPassedRequestToAReplicaThatLostItsDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two parley processes and freezes one's database")
	}
	pgURL := dbtest.PostgresURL(t)
	proxy := dbtest.NewProxy(t, "127.0.0.1:5432")
	config := func(url string, port int) string {
		return "database:\n  url: \"" + url + "\"\n" +
			"http:\n  listen: 127.0.0.1:" + strconv.Itoa(port) + "\n  tokens: [\"" + replicaToken + "\"]\n" +
			"agents:\n  - id: default\n    model: echo\n"
	}
	pa, pb := freePort(t), freePort(t)
	a := startReplica(t, config(proxy.Via(t, pgURL), pa), pa, cluster.EnvHost+"=host-a")
	b := startReplica(t, config(pgURL, pb), pb, cluster.EnvHost+"=host-b")
	c := replicaClient{t: t, http: &http.Client{Timeout: 20 * time.Second}}
	var s struct {
		ID string `json:"id"`
	}
	if _, err := c.do("POST", a.url+"/v1/sessions", map[string]any{}, &s); err != nil {
		t.Fatal(err)
	}
	// a runs the session: it answers through b.
	if _, err := c.messages(a.url, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.messages(b.url, s.ID); err != nil {
		t.Fatalf("read through b: %v", err)
	}

	proxy.Freeze()
	defer proxy.Restore()
	start := time.Now()
	req, _ := http.NewRequest("GET", b.url+"/v1/sessions/"+s.ID+"/messages", nil)
	req.Header.Set("Authorization", "Bearer "+replicaToken)
	resp, err := c.http.Do(req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a request passed to a replica without its database: %v after %s; want a 503 within seconds", err, took.Round(time.Millisecond))
	}
	resp.Body.Close()
	t.Logf("answered %d after %s", resp.StatusCode, took.Round(10*time.Millisecond))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || took > 10*time.Second {
		t.Fatalf("a request passed to a replica without its database: %d (Retry-After %q) after %s; want 503 with Retry-After within 10s",
			resp.StatusCode, resp.Header.Get("Retry-After"), took)
	}
	// Retried, as Retry-After says, it reaches the session's new holder.
	for {
		_, err := c.messages(b.url, s.ID)
		if err == nil {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the retries through b never got an answer: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("answered by the new holder %s after the freeze", time.Since(start).Round(10*time.Millisecond))
}
