package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/sessions"
)

// countingReceiver counts the POSTs of each reply message id.
type countingReceiver struct {
	mu    sync.Mutex
	posts map[string]int
	total int
}

func newCountingReceiver() *countingReceiver { return &countingReceiver{posts: map[string]int{}} }

func (rc *countingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var p api.CallbackPayload
	_ = json.Unmarshal(body, &p)
	rc.mu.Lock()
	rc.posts[p.MessageID]++
	rc.total++
	rc.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (rc *countingReceiver) counts() (distinct, total int, twice []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for id, n := range rc.posts {
		if n > 1 && len(twice) < 5 {
			twice = append(twice, id)
		}
	}
	return len(rc.posts), rc.total, twice
}

// hookedStore is a store that queues reply callbacks with each reply, as
// the daemon's does, and a session of it whose webhook_url is hook.
func hookedStore(t *testing.T, db *dbutil.DB, hold time.Duration, hook string) (*sessions.SQLStore, sessions.Session) {
	t.Helper()
	st := sessions.NewStore(db, sessions.WithAppendHook(api.ReplyCallbackHook(hold)))
	s, err := st.Create(context.Background(), sessions.ChatKey(sessions.SurfaceAPI, "c1", "u1", "main"),
		sessions.CreateOptions{Metadata: json.RawMessage(`{"webhook_url":"` + hook + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return st, s
}

func runCallbacks(t *testing.T, db *dbutil.DB, st *sessions.SQLStore) {
	t.Helper()
	cb := api.NewCallbacks(api.CallbackOptions{DB: db, Store: st, Bus: events.New(), Secret: callbackSecret, Allow: []string{"127.0.0.1"},
		Backoff: func(int) time.Duration { return 0 }, Poll: 2 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cb.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// A reply stored just before the process died (its turn's end never
// published) still gets its callback, from the next process's sender:
// it was queued in the transaction that stored it. A tool call's text and
// a user message get none.
func TestReplyCallbackSurvivesACrashAfterTheReply(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		rc := newCountingReceiver()
		hook := newHookServer(t, rc)
		t.Cleanup(hook.Close)
		db := open(t)
		st, s := hookedStore(t, db, time.Millisecond, hook.URL)
		ctx := context.Background()
		if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "hello"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "let me look",
			ToolCalls: []sessions.ToolCall{{ID: "c1", Name: "memory_search", Arguments: json.RawMessage(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
		reply, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "hello to you"})
		if err != nil {
			t.Fatal(err)
		}
		// The process that stored it is gone; a new one starts its sender.
		runCallbacks(t, db, sessions.NewStore(db))
		waitFor(t, "the stored reply's callback", func() bool { n, _, _ := rc.counts(); return n == 1 })
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.posts[string(reply.ID)] != 1 || rc.total != 1 {
			t.Fatalf("posts %v, want one for %s", rc.posts, reply.ID)
		}
	})
}

// Two senders on one database (two replicas, or a sender whose lease
// lapsed) never POST one callback twice: each claims with a lease.
func TestTwoCallbackSendersPostEachOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		rc := newCountingReceiver()
		hook := newHookServer(t, rc)
		t.Cleanup(hook.Close)
		db := open(t)
		st, s := hookedStore(t, db, time.Millisecond, hook.URL)
		const n = 300
		for i := range n {
			if _, err := st.Append(context.Background(), s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "reply " + string(rune('a'+i%26))}); err != nil {
				t.Fatal(err)
			}
		}
		runCallbacks(t, db, st)
		runCallbacks(t, db, st)
		waitFor(t, "every callback", func() bool { d, _, _ := rc.counts(); return d == n })
		waitFor(t, "every callback recorded as delivered", func() bool {
			var delivered int
			_ = db.Reader().QueryRow(`SELECT count(*) FROM api_callbacks WHERE status = 'delivered'`).Scan(&delivered)
			return delivered == n
		})
		if d, total, twice := rc.counts(); d != n || total != n {
			t.Fatalf("%d replies got %d POSTs; posted twice (up to 5): %v", d, total, twice)
		}
	})
}
