package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm/llmtest"
)

// Two replicas: a request is authenticated before a replica places or
// passes it anywhere, and the hop header between replicas is proven, not
// taken on a client's word. Unauthenticated requests about sessions claim
// none of them; a client's own X-Parley-Replica-Hop on a request about a
// session running on the other replica is passed on all the same, so the
// status it reads is the run's (busy), not an idle copy.
func TestReplicasAuthenticateBeforePassingRequestsOn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two parley processes")
	}
	pgURL := dbtest.PostgresURL(t)
	slow := llmtest.NewOpenAIEcho(t, 20*time.Second)
	config := func(port int) string {
		return "database:\n  url: \"" + pgURL + "\"\n" +
			"http:\n  listen: 127.0.0.1:" + strconv.Itoa(port) + "\n  tokens: [\"" + replicaToken + "\"]\n" +
			"gateway:\n  debounce: 0s\n" + slow.ConfigYAML() +
			"agents:\n  - id: default\n    model: echo\n"
	}
	pa, pb := freePort(t), freePort(t)
	a := startReplica(t, config(pa), pa, cluster.EnvHost+"=host-a")
	b := startReplica(t, config(pb), pb, cluster.EnvHost+"=host-b")
	c := replicaClient{t: t, http: &http.Client{Timeout: 15 * time.Second}}
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lanes := func() int {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM holds WHERE name LIKE 'lane:%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Sessions nobody runs yet, asked about without a token.
	var ids []string
	for range 5 {
		var s struct {
			ID string `json:"id"`
		}
		if _, err := c.do("POST", a.url+"/v1/sessions", map[string]any{}, &s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	before := lanes()
	for _, id := range ids {
		for _, sub := range []string{"status", "events", "messages"} {
			resp, err := http.Get(b.url + "/v1/sessions/" + id + "/" + sub)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s without a token: %d; want 401", sub, resp.StatusCode)
			}
		}
	}
	if after := lanes(); after != before {
		t.Fatalf("unauthenticated requests made the replicas claim %d sessions; want none", after-before)
	}

	// A run on a, asked about through b with a client's own hop header.
	var s struct {
		ID string `json:"id"`
	}
	if _, err := c.do("POST", a.url+"/v1/sessions", map[string]any{"model": "openai/gpt-test"}, &s); err != nil {
		t.Fatal(err)
	}
	if _, err := c.do("POST", a.url+"/v1/sessions/"+s.ID+"/messages", map[string]string{"content": "take your time"}, nil); err != nil {
		t.Fatal(err)
	}
	var st struct {
		State string `json:"state"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.State != "busy" {
		if _, err := c.do("GET", a.url+"/v1/sessions/"+s.ID+"/status", nil, &st); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never showed busy on its replica: %q", st.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, forged := range []string{"x", "someone", fmt.Sprintf("a-000000 %d 00", time.Now().Unix())} {
		req, _ := http.NewRequest("GET", b.url+"/v1/sessions/"+s.ID+"/status", nil)
		req.Header.Set("Authorization", "Bearer "+replicaToken)
		req.Header.Set("X-Parley-Replica-Hop", forged)
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			State string `json:"state"`
		}
		err = jsonDecode(resp, &got)
		if err != nil || resp.StatusCode != http.StatusOK || got.State != "busy" {
			t.Fatalf("status through b with a forged hop header %q: %d %q (%v); want the run's state, busy", forged, resp.StatusCode, got.State, err)
		}
	}
	_, _ = c.do("POST", a.url+"/v1/sessions/"+s.ID+"/abort", nil, nil)
}

// jsonDecode reads resp's JSON body into out and closes it.
func jsonDecode(resp *http.Response, out any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}
