package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/signing"

	"github.com/jackc/pgx/v5"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/turns"
	"github.com/parleyd/parley/webhooks"
)

// PostgreSQL is cut for 8 s (every connection dropped, new ones refused)
// under API and webhook load. While it is down the API answers 503 with
// Retry-After (never 500) and hooks 503, and clients send again; every
// message that was accepted (202) is answered once, by a reply that
// answers it, within 10 s of the database coming back, though the
// daemon's backends are then killed under load as well.
func TestDatabaseOutageUnderLoad(t *testing.T) {
	dbtest.RequirePostgres(t)
	if testing.Short() {
		t.Skip("cuts the database for 8 s")
	}
	proxy := dbtest.NewProxy(t, "127.0.0.1:5432")
	// A model slow enough that turns are in flight when the cut comes.
	model := llmtest.NewOpenAIEcho(t, 150*time.Millisecond)
	// The daemon's connections carry a name of their own, so the test can
	// kill its backends, and only its.
	appName := fmt.Sprintf("parley_fault_%d", time.Now().UnixNano())
	dbURL := proxy.Via(t, dbtest.PostgresURL(t)) + "&application_name=" + appName
	path := filepath.Join(t.TempDir(), "parley.yaml")
	cfg := "database:\n  url: " + dbURL + "\n" +
		"gateway:\n  debounce: 0s\n" +
		"http:\n  tokens: [\"" + apiToken + "\"]\n" +
		model.ConfigYAML() + "agents:\n  - id: default\n    model: openai/gpt-test\n" +
		"hooks:\n  - id: ci\n    auth: hmac\n    secret: " + hookSecret + "\n    prompt: \"build {{.build}} failed\"\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d, url, stop := testDaemonAt(t, path, func(d *Daemon) map[adapters.ID]adapters.Adapter {
		return map[adapters.ID]adapters.Adapter{
			"api":              turns.APIChannel{},
			webhooks.AdapterID: webhooks.New(webhooks.Options{Hooks: d.cfg().Hooks, DB: d.db, Notify: d.gw.Notify}),
		}
	})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &client.Client{Base: url, Token: apiToken}
	const nSessions = 12
	ids := make([]string, nSessions)
	for i := range ids {
		var s struct{ ID string }
		if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": fmt.Sprint("load ", i), "user": fmt.Sprint("user-", i)}, &s); err != nil {
			t.Fatal(err)
		}
		ids[i] = s.ID
	}

	var (
		mu          sync.Mutex
		accepted    = map[string][]string{} // session id -> accepted contents, in order
		hooksOK     atomic.Int64
		unavailable atomic.Int64 // 503s met, each with Retry-After
		stopLoad    = make(chan struct{})
		wg          sync.WaitGroup
		followers   sync.WaitGroup
	)
	// post sends body until it is taken (2xx), returning the status; a
	// 503 or a cut connection is sent again, as a client would.
	post := func(req func() *http.Request) (int, []byte) {
		for {
			select {
			case <-ctx.Done():
				return 0, nil
			default:
			}
			resp, err := http.DefaultClient.Do(req())
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode < 300, resp.StatusCode == http.StatusTooManyRequests:
				// Taken, or refused with the reason (the session's queue is
				// full): either way the client knows where it stands.
				return resp.StatusCode, body
			case resp.StatusCode == http.StatusServiceUnavailable:
				if resp.Header.Get("Retry-After") == "" && !strings.HasPrefix(req().URL.Path, "/hooks/") {
					t.Errorf("a 503 without Retry-After")
				}
				unavailable.Add(1)
				time.Sleep(100 * time.Millisecond)
			default:
				t.Errorf("%s: %d while the database was unavailable or back; want 2xx or 503", req().URL.Path, resp.StatusCode)
				return resp.StatusCode, body
			}
		}
	}
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stopLoad:
					return
				case <-time.After(200 * time.Millisecond):
				}
				content := fmt.Sprintf("session %d message %d", i, k)
				body, _ := json.Marshal(map[string]any{"content": content})
				status, out := post(func() *http.Request {
					r, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/sessions/"+id+"/messages", bytes.NewReader(body))
					r.Header.Set("Authorization", "Bearer "+apiToken)
					r.Header.Set("Content-Type", "application/json")
					return r
				})
				if status != http.StatusAccepted {
					continue
				}
				mu.Lock()
				accepted[id] = append(accepted[id], content)
				mu.Unlock()
				var run struct {
					RunID string `json:"run_id"`
				}
				_ = json.Unmarshal(out, &run)
				// As the web chat does, follow the run the 202 named: it
				// must end with the reply, not a failure the retry mends.
				followers.Add(1)
				go func() {
					defer followers.Done()
					if failure, err := runOutcome(ctx, c, id, run.RunID); err != nil || failure != "" {
						t.Errorf("%q: its run %s ended with %q (%v); want its reply", content, run.RunID, failure, err)
					}
				}()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; ; k++ {
			select {
			case <-stopLoad:
				return
			case <-time.After(50 * time.Millisecond):
			}
			body := []byte(fmt.Sprintf(`{"build":"b%d"}`, k))
			if status, _ := post(func() *http.Request {
				ts, sig := signing.Sign(hookSecret, time.Now(), body)
				r, _ := http.NewRequestWithContext(ctx, "POST", url+"/hooks/ci", bytes.NewReader(body))
				r.Header.Set("X-Parley-Timestamp", ts)
				r.Header.Set("X-Parley-Signature", sig)
				r.Header.Set("X-Parley-Delivery", fmt.Sprint("delivery-", k))
				return r
			}); status == http.StatusAccepted {
				hooksOK.Add(1)
			}
		}
	}()

	time.Sleep(2 * time.Second)
	proxy.Cut()
	time.Sleep(8 * time.Second)
	proxy.Restore()
	back := time.Now()
	// Then its backends are killed under load, as a failover or an
	// administrator's pg_terminate_backend would.
	time.Sleep(time.Second)
	admin, err := pgx.Connect(ctx, os.Getenv(dbtest.EnvPostgres))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed int
	if err := admin.QueryRow(ctx, "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) k", appName).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("no backend of the daemon's was found to kill")
	}
	time.Sleep(time.Second)
	close(stopLoad)
	wg.Wait()
	followers.Wait()
	if unavailable.Load() == 0 {
		t.Fatal("no request met the outage; the cut did not reach the daemon")
	}

	// Every accepted message answered, within 10 s of the database's return.
	for {
		n, err := d.store.Unanswered(ctx)
		if err == nil && n == 0 {
			break
		}
		if time.Since(back) > 10*time.Second {
			var stuck []string
			if rows, qerr := d.db.Reader().QueryContext(ctx, "SELECT id, adapter, chat_id, COALESCE(session_id, ''), instance FROM inbound WHERE status = 'accepted'"); qerr == nil {
				for rows.Next() {
					var id, adapter, chat, sess, instance string
					_ = rows.Scan(&id, &adapter, &chat, &sess, &instance)
					stuck = append(stuck, fmt.Sprintf("%s (%s %s, session %q, instance %s)", id, adapter, chat, sess, instance))
				}
				rows.Close()
			}
			t.Fatalf("%d accepted messages still unanswered 10 s after the database came back (%v): %s", n, err, strings.Join(stuck, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
	answeredIn := time.Since(back)
	total := 0
	for _, id := range ids {
		msgs, err := d.sessions.Messages(ctx, sessions.ID(id), sessions.MessagesOptions{Archived: true})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		want := accepted[id]
		mu.Unlock()
		total += len(want)
		var got []string
		for i, m := range msgs {
			switch m.Role {
			case sessions.RoleUser:
				got = append(got, m.Content)
			case sessions.RoleAssistant:
				if i == 0 || msgs[i-1].Role != sessions.RoleUser || !strings.Contains(m.Content, msgs[i-1].Content) {
					t.Fatalf("session %s: message %d, the reply %q, doesn't answer the message before it", id, i, m.Content)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("session %s holds the messages %q; want the accepted ones, once each, in order: %q", id, got, want)
		}
		if len(msgs) != 2*len(want) {
			t.Fatalf("session %s holds %d messages for %d accepted: one reply each is %d", id, len(msgs), len(want), 2*len(want))
		}
	}
	var failed, hookAnswered int
	// A message whose accept met the cut may have committed though its
	// sender got a 503 and sent it again: that copy is settled as not run.
	if err := d.db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM inbound WHERE status <> 'done' AND error NOT LIKE 'not run: %'").Scan(&failed); err != nil {
		t.Fatal(err)
	}
	if failed != 0 {
		var why []string
		if rows, err := d.db.Reader().QueryContext(ctx, "SELECT adapter, status, error FROM inbound WHERE status <> 'done' AND error NOT LIKE 'not run: %'"); err == nil {
			for rows.Next() {
				var adapter, status, e string
				_ = rows.Scan(&adapter, &status, &e)
				why = append(why, adapter+" "+status+": "+e)
			}
			rows.Close()
		}
		t.Fatalf("%d accepted messages failed or were marked; want every one answered: %s", failed, strings.Join(why, "; "))
	}
	if err := d.db.Reader().QueryRowContext(ctx,
		"SELECT COUNT(DISTINCT m.session_id) FROM messages m JOIN sessions s ON s.id = m.session_id WHERE s.surface = 'webhook' AND m.role = 'assistant'").Scan(&hookAnswered); err != nil {
		t.Fatal(err)
	}
	if int64(hookAnswered) != hooksOK.Load() {
		t.Fatalf("%d webhook deliveries answered; %d were accepted", hookAnswered, hooksOK.Load())
	}
	t.Logf("%d API messages and %d webhook deliveries accepted, each answered once; %d requests met the outage (503); %d backends killed after it; all answered %s after the database came back",
		total, hooksOK.Load(), unavailable.Load(), killed, answeredIn.Round(time.Millisecond))
}

// runOutcome follows a run on the session's event stream until it
// finishes, and returns its error text ("" for a reply).
func runOutcome(ctx context.Context, c *client.Client, sessionID, runID string) (string, error) {
	for {
		failure, err := c.Follow(ctx, sessionID, runID, io.Discard)
		if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), ": 503 ") {
			return failure, err
		}
		time.Sleep(100 * time.Millisecond) // the database is down (503): try again, as the web chat does
	}
}
