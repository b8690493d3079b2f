package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/client"
)

// replyReceiver is a session's webhook_url: it counts the POSTs of each
// reply message id, and each session's.
type replyReceiver struct {
	mu        sync.Mutex
	byMessage map[string]int
	bySession map[string]int
	total     int
}

func (rc *replyReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p struct {
		SessionID string `json:"session_id"`
		MessageID string `json:"message_id"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &p)
	rc.mu.Lock()
	rc.byMessage[p.MessageID]++
	rc.bySession[p.SessionID]++
	rc.total++
	rc.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (rc *replyReceiver) session(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.bySession[id]
}

// Every reply of an API session with a webhook_url is POSTed to it once:
// 500 messages through the daemon, sent closed loop (each client waits
// for its reply's callback before the next message) and open loop (all at
// once, so a session's next message is stored before its last turn's end
// is seen). Each reply message id gets exactly one POST.
func TestReplyCallbackForEveryReply(t *testing.T) {
	for _, tc := range []struct {
		name               string
		sessions, messages int
		closed             bool
	}{
		{"closed loop", 5, 100, true},
		{"open loop", 25, 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachEngine(t, func(t *testing.T, dbURL string) {
				ctx := context.Background()
				rc := &replyReceiver{byMessage: map[string]int{}, bySession: map[string]int{}}
				hook := httptest.NewServer(rc)
				defer hook.Close()
				d, url, stop := testDaemonOn(t, dbURL, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+
					"\"]\n  callback_secret: \"0123456789abcdef0123456789abcdef-callbacks\"\n  callback_allow: [\"127.0.0.1\"]\n", apiOnly)
				defer stop()
				c := &client.Client{Base: url, Token: apiToken}
				var wg sync.WaitGroup
				errs := make(chan error, tc.sessions)
				for s := range tc.sessions {
					var sess struct {
						ID string `json:"id"`
					}
					if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": fmt.Sprint("s", s), "webhook_url": hook.URL}, &sess); err != nil {
						t.Fatal(err)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range tc.messages {
							if err := c.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/messages", map[string]any{"content": fmt.Sprint("message ", i)}, &struct{}{}); err != nil {
								errs <- err
								return
							}
							if !tc.closed {
								continue
							}
							deadline := time.Now().Add(30 * time.Second)
							for rc.session(sess.ID) < i+1 {
								if time.Now().After(deadline) {
									errs <- fmt.Errorf("session %s: no callback for message %d within 30s", sess.ID, i)
									return
								}
								time.Sleep(time.Millisecond) // polls the receiver: a closed loop's pace
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				want := tc.sessions * tc.messages
				// Wait for every callback (the figures below say what is
				// missing if some never come).
				for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					var delivered int
					_ = d.db.Reader().QueryRow(`SELECT count(*) FROM api_callbacks WHERE status = 'delivered'`).Scan(&delivered)
					if delivered >= want {
						break
					}
				}
				var replies int
				if err := d.db.Reader().QueryRow(`SELECT count(*) FROM messages WHERE role = 'assistant'`).Scan(&replies); err != nil {
					t.Fatal(err)
				}
				rc.mu.Lock()
				defer rc.mu.Unlock()
				var twice []string
				for id, n := range rc.byMessage {
					if n != 1 && len(twice) < 5 {
						twice = append(twice, fmt.Sprint(id, "×", n))
					}
				}
				if replies != want || len(rc.byMessage) != want || rc.total != want || len(twice) > 0 {
					t.Fatalf("%d messages, %d replies stored, %d replies POSTed in %d POSTs; not once: %v",
						want, replies, len(rc.byMessage), rc.total, twice)
				}
			})
		})
	}
}
