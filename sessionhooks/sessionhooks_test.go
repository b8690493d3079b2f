package sessionhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessionhooks"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/signing"
)

const hookSecret = "5e2b7c9d1f3a4e6b8c0d2f4a6b8c0e1d3f5a7b9c1d3e5f7a9b0c2d4e6f8a1b3c"

// receiver is an integrator's endpoint: it checks each POST's signature,
// records it, and fails or answers as told.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	got      []sessionhooks.Event // every POST, retries included
	took     []sessionhooks.Event // the POSTs answered 2xx, in order
	fails    map[string]int       // event type -> POSTs of it still to fail
	answer   func(ev sessionhooks.Event) string
	delay    time.Duration
	badSigns int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, fails: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev sessionhooks.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		if !signing.Valid(req.Header.Get("X-Parley-Signature"), []byte(hookSecret), []byte(req.Header.Get("X-Parley-Timestamp")+"."+string(body))) ||
			req.Header.Get("X-Parley-Delivery") != ev.ID || req.Header.Get("X-Parley-Event") != ev.Event {
			r.badSigns++
		}
		r.got = append(r.got, ev)
		fail := r.fails[ev.Event] > 0
		if fail {
			r.fails[ev.Event]--
		}
		answer, delay := "", r.delay
		if r.answer != nil {
			answer = r.answer(ev)
		}
		r.mu.Unlock()
		time.Sleep(delay)
		if fail {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		r.mu.Lock()
		r.took = append(r.took, ev)
		r.mu.Unlock()
		w.Write([]byte(answer))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) events() []sessionhooks.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sessionhooks.Event(nil), r.got...)
}

type rig struct {
	db    *dbutil.DB
	hooks *sessionhooks.Hooks
	store *sessions.SQLStore
	cfg   []config.SessionHook
}

func newRig(t *testing.T, db *dbutil.DB, cfg ...config.SessionHook) *rig {
	r := &rig{db: db, cfg: cfg}
	r.hooks = sessionhooks.New(sessionhooks.Options{DB: db, Hooks: func() []config.SessionHook { return r.cfg },
		Backoff: func(int) time.Duration { return 0 }, Lease: 2 * time.Second})
	r.store = sessions.NewStore(db, sessions.WithLifecycleHook(r.hooks.Lifecycle), sessions.WithAppendHook(r.hooks.Append),
		sessions.WithBeforeAppendHook(r.hooks.Before), sessions.WithDeleteHook(sessionhooks.ForgetSessions))
	return r
}

func hook(url string, mod func(*config.SessionHook)) config.SessionHook {
	h := config.SessionHook{URL: url, Secret: config.Secret(hookSecret)}
	if mod != nil {
		mod(&h)
	}
	return h
}

// syncRig is a rig with one hook at recv that takes message.user
// synchronously (within 2 s), and a session to append to.
func syncRig(t *testing.T, db *dbutil.DB, recv *receiver) (*rig, sessions.Session) {
	t.Helper()
	r := newRig(t, db, hook(recv.srv.URL, func(h *config.SessionHook) {
		h.Events = []string{"message.user"}
		h.SyncTimeout = config.Duration(2 * time.Second)
	}))
	s, _, err := r.store.Resolve(context.Background(), sessions.CLIKey("u", "main"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	return r, s
}

// sendAll sends until nothing is due, as the sender's loop would.
func sendAll(t *testing.T, h *sessionhooks.Hooks) {
	t.Helper()
	for range 50 {
		if err := h.SendDue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Each change in a session's life is posted once (one id, however many
// tries), signed, in the order the changes happened, per session, even
// when a POST fails and is retried; a hook for another agent gets none.
func TestEventsInOrderPerSession(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		recv, other := newReceiver(t), newReceiver(t)
		r := newRig(t, open(t), hook(recv.srv.URL, nil), hook(other.srv.URL, func(h *config.SessionHook) { h.Agents = []string{"elsewhere"} }))
		recv.fails["session.created"] = 2 // the first event fails twice: the rest of its session waits
		key := sessions.CLIKey("u1", "main")
		s, _, err := r.store.Resolve(ctx, key, sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []sessions.Message{{Role: sessions.RoleUser, Content: "one"}, {Role: sessions.RoleAssistant, Content: "two"},
			{Role: sessions.RoleUser, Content: "three"}} {
			if _, err := r.store.Append(ctx, s.ID, m); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.store.Compact(ctx, s.ID, sessions.CompactInput{Through: 2, Expect: 2, Summary: "sum"}); err != nil {
			t.Fatal(err)
		}
		next, err := r.store.Reset(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.store.Delete(ctx, next.ID); err != nil {
			t.Fatal(err)
		}
		// A change that fails queues nothing.
		if _, err := r.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "bad", Metadata: json.RawMessage(`[1]`)}); err == nil {
			t.Fatal("a bad message was stored")
		}
		sendAll(t, r.hooks)

		posts := recv.events()
		recv.mu.Lock()
		took := append([]sessionhooks.Event(nil), recv.took...)
		recv.mu.Unlock()
		order := map[string][]string{} // per session, as taken
		ids := map[string]string{}     // id -> event
		for _, ev := range took {
			if prev, seen := ids[ev.ID]; seen {
				if prev != ev.Event {
					t.Fatalf("id %s was %s and %s", ev.ID, prev, ev.Event)
				}
				continue // a retry of one already posted
			}
			ids[ev.ID] = ev.Event
			what := ev.Event
			if ev.Message != nil {
				what += ":" + ev.Message.Content
			}
			order[ev.SessionID] = append(order[ev.SessionID], what)
			if ev.AgentID != "main" || ev.UserID != "u1" || ev.Surface != "cli" {
				t.Fatalf("%s without its session's key: %+v", ev.Event, ev)
			}
		}
		for id, want := range map[sessions.ID]string{
			s.ID:    "session.created message.user:one message.user:three session.compacted session.archived",
			next.ID: "session.reset session.deleted",
		} {
			if got := strings.Join(order[string(id)], " "); got != want {
				t.Fatalf("session %s's events posted in this order:\n%s\nwant\n%s", id, got, want)
			}
		}
		if len(took) != len(ids) || len(posts) != len(ids)+2 {
			t.Fatalf("%d POSTs for %d events with 2 failures; want each sent once more than it failed", len(posts), len(ids))
		}
		if recv.badSigns != 0 {
			t.Fatalf("%d POSTs not signed as documented", recv.badSigns)
		}
		if n := len(other.events()); n != 0 {
			t.Fatalf("the hook for another agent got %d events", n)
		}
		// The reset tells which session it archived; the compaction what.
		for _, ev := range posts {
			if ev.Event == "session.reset" && ev.OldSessionID != string(s.ID) {
				t.Fatalf("reset without the old session: %+v", ev)
			}
			if ev.Event == "session.compacted" && (ev.Compaction == nil || ev.Compaction.Archived != 2 || ev.Compaction.Through != 2) {
				t.Fatalf("compacted without what: %+v", ev.Compaction)
			}
		}
		deliveries, err := r.hooks.List(ctx, string(s.ID))
		if err != nil || len(deliveries) != 5 || deliveries[0].Status != sessionhooks.StatusDelivered || deliveries[0].Attempts != 3 {
			t.Fatalf("deliveries %+v %v", deliveries, err)
		}
	})
}

// A sender that claims events and dies before recording them (a SIGKILL
// mid-POST) leaves them to another sender once its lease lapses: they are
// posted again under the same id, never lost.
func TestASenderThatDiesLeavesItsEventsToAnother(t *testing.T) {
	dbtest.EachTwoHandles(t, func(t *testing.T, a, b *dbutil.DB) {
		ctx := context.Background()
		recv := newReceiver(t)
		recv.delay = 300 * time.Millisecond
		dying := newRig(t, a, hook(recv.srv.URL, nil))
		if _, _, err := dying.store.Resolve(ctx, sessions.CLIKey("u", "main"), sessions.Policy{}); err != nil {
			t.Fatal(err)
		}
		cctx, kill := context.WithTimeout(ctx, 100*time.Millisecond) // killed while its POST waits for the answer
		_ = dying.hooks.SendDue(cctx)
		kill()
		survivor := newRig(t, b, hook(recv.srv.URL, nil))
		recv.mu.Lock()
		recv.delay = 0
		recv.mu.Unlock()
		deadline := time.Now().Add(10 * time.Second)
		var list []sessionhooks.Delivery
		for time.Now().Before(deadline) {
			sendAll(t, survivor.hooks)
			evs := recv.events()
			if len(evs) >= 2 {
				if evs[0].ID != evs[len(evs)-1].ID {
					t.Fatalf("the event was posted under two ids: %s, %s", evs[0].ID, evs[len(evs)-1].ID)
				}
				var err error
				if list, err = survivor.hooks.List(ctx, evs[0].SessionID); err != nil {
					t.Fatal(err)
				}
				if len(list) == 1 && list[0].Status == sessionhooks.StatusDelivered {
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("the survivor never sent the dead sender's event: %d POSTs, %+v", len(recv.events()), list)
	})
}

// A synchronous message.user hook is asked before the message is stored;
// the snapshot_id it answers is kept in the message's metadata, and a
// rewind that takes the message back returns it. A hook that doesn't
// answer in time leaves the message stored as it was.
func TestSyncMessageUserSnapshot(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		recv := newReceiver(t)
		n := 0
		recv.answer = func(ev sessionhooks.Event) string {
			n++
			return fmt.Sprintf(`{"snapshot_id":"snap-%d"}`, n)
		}
		r, s := syncRig(t, open(t), recv)
		var users []sessions.Message
		for _, text := range []string{"first", "second"} {
			m, err := r.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: text})
			if err != nil {
				t.Fatal(err)
			}
			users = append(users, m)
			if _, err := r.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "re " + text}); err != nil {
				t.Fatal(err)
			}
		}
		for i, m := range users {
			if want := fmt.Sprintf(`{"snapshot_id":"snap-%d"}`, i+1); string(m.Metadata) != want {
				t.Fatalf("user message %d metadata %s, want %s", i, m.Metadata, want)
			}
		}
		// Synchronous means not queued as well.
		sendAll(t, r.hooks)
		if got := len(recv.events()); got != 2 {
			t.Fatalf("%d POSTs, want the 2 synchronous ones", got)
		}
		// /undo of the second exchange: the host restores its world from
		// before the second message.
		res, err := r.store.RewindFrom(ctx, s.ID, users[1].ID)
		if err != nil || res.SnapshotID != "snap-2" {
			t.Fatalf("rewind from the second message: %+v %v; want snap-2", res.SnapshotID, err)
		}
		if _, err := r.store.Unrewind(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		// Back to the first (kept): what is taken back starts at the second.
		if res, err := r.store.Rewind(ctx, s.ID, users[0].ID); err != nil || res.SnapshotID != "snap-2" {
			t.Fatalf("rewind to the first message: %+v %v; want snap-2", res.SnapshotID, err)
		}

		recv.mu.Lock()
		recv.delay = 3 * time.Second
		recv.mu.Unlock()
		start := time.Now()
		late, err := r.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "third"})
		if err != nil || len(late.Metadata) != 0 || time.Since(start) > 2900*time.Millisecond {
			t.Fatalf("a hook past its sync_timeout: stored %v with metadata %s after %s", err, late.Metadata, time.Since(start))
		}
	})
}

// A hook URL's password and query values never reach an error, the log or
// the delivery record, even when the receiver can't be reached.
func TestHookURLSecretsStayOut(t *testing.T) {
	ctx := context.Background()
	var logged strings.Builder
	db := dbtest.SQLite(t)
	cfg := []config.SessionHook{hook("http://user:pw-0123456789@127.0.0.1:9/events?token=tk-0123456789", nil)}
	h := sessionhooks.New(sessionhooks.Options{DB: db, Hooks: func() []config.SessionHook { return cfg },
		Backoff: func(int) time.Duration { return 0 }, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	store := sessions.NewStore(db, sessions.WithLifecycleHook(h.Lifecycle))
	s, _, err := store.Resolve(ctx, sessions.CLIKey("u", "main"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SendDue(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := h.List(ctx, string(s.ID))
	if err != nil || len(list) != 1 || list[0].LastError == "" {
		t.Fatalf("deliveries %+v %v; want one failed attempt", list, err)
	}
	for what, text := range map[string]string{"log": logged.String(), "record": list[0].LastError + " " + list[0].URL} {
		if strings.Contains(text, "0123456789") {
			t.Fatalf("the %s holds the URL's secrets: %s", what, text)
		}
	}
}

// Deleting a session deletes its message.user events, which hold the
// person's words, whether sent or not; its session.deleted is still sent.
func TestDeletingASessionForgetsItsMessageEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		recv := newReceiver(t)
		db := open(t)
		r := newRig(t, db, hook(recv.srv.URL, nil))
		s, _, err := r.store.Resolve(ctx, sessions.CLIKey("u", "main"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{"my address is 1 Secret Lane", "and my phone"} {
			if _, err := r.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: text}); err != nil {
				t.Fatal(err)
			}
		}
		sendAll(t, r.hooks) // the first is sent; the second stays queued too below
		if _, err := r.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "unsent: Secret Lane again"}); err != nil {
			t.Fatal(err)
		}
		if err := r.store.Delete(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		var left int
		if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM session_hook_events WHERE body LIKE '%Secret Lane%'`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Fatalf("%d events still hold the deleted session's words", left)
		}
		sendAll(t, r.hooks)
		list, err := r.hooks.List(ctx, string(s.ID))
		if err != nil || len(list) != 2 || list[0].Event != "session.created" || list[1].Event != "session.deleted" || list[1].Status != sessionhooks.StatusDelivered {
			t.Fatalf("after the deletion: %+v %v; want session.created and a delivered session.deleted", list, err)
		}
	})
}

// A synchronous message.user POST that fails is not lost: the message is
// stored without a snapshot and the event is queued for that hook in the
// append's transaction, then sent as the rest are, under the failed POST's
// delivery id; a POST that succeeded is not queued again.
func TestFailedSyncMessageUserIsQueued(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		recv := newReceiver(t)
		recv.fails["message.user"] = 1
		r, s := syncRig(t, open(t), recv)
		lost, err := r.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "first"})
		if err != nil || len(lost.Metadata) != 0 {
			t.Fatalf("append after a failed synchronous POST: %v, metadata %s", err, lost.Metadata)
		}
		if _, err := r.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "second"}); err != nil {
			t.Fatal(err)
		}
		sendAll(t, r.hooks)
		got := recv.events()
		if len(got) != 3 || got[0].Message.Content != "first" || got[1].Message.Content != "second" || got[2].Message.Content != "first" {
			t.Fatalf("POSTs %+v; want first (failed), second (synchronous), first (queued)", got)
		}
		if got[2].ID != got[0].ID || got[2].Message.ID != string(lost.ID) {
			t.Fatalf("the queued POST's delivery id %s, the failed one's %s", got[2].ID, got[0].ID)
		}
		recv.mu.Lock()
		took, bad := len(recv.took), recv.badSigns
		recv.mu.Unlock()
		if took != 2 || bad != 0 {
			t.Fatalf("%d POSTs taken (want 2), %d badly signed", took, bad)
		}
	})
}

// A hook that is down holds back only its own events: another hook gets
// the same session's events, in order, while the first's wait to be
// retried, and the first still gets them in order when it is back.
func TestAHookThatIsDownHoldsBackOnlyItsOwn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		down, up := newReceiver(t), newReceiver(t)
		down.fails["session.created"] = 1
		now := time.Now()
		r := newRig(t, open(t), hook(down.srv.URL, nil), hook(up.srv.URL, nil))
		var clock sync.Mutex
		r.hooks = sessionhooks.New(sessionhooks.Options{DB: r.db, Hooks: func() []config.SessionHook { return r.cfg },
			Backoff: func(int) time.Duration { return time.Hour }, Lease: 2 * time.Second,
			Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }})
		r.store = sessions.NewStore(r.db, sessions.WithLifecycleHook(r.hooks.Lifecycle), sessions.WithAppendHook(r.hooks.Append))
		s, _, err := r.store.Resolve(ctx, sessions.CLIKey("u", "main"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{"one", "two"} {
			if _, err := r.store.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: text}); err != nil {
				t.Fatal(err)
			}
		}
		seen := func(rv *receiver) string {
			rv.mu.Lock()
			defer rv.mu.Unlock()
			var out []string
			for _, ev := range rv.took {
				what := ev.Event
				if ev.Message != nil {
					what += ":" + ev.Message.Content
				}
				out = append(out, what)
			}
			return strings.Join(out, " ")
		}
		sendAll(t, r.hooks)
		const all = "session.created message.user:one message.user:two"
		if got := seen(up); got != all {
			t.Fatalf("the hook that is up got %q while the other was down; want %q", got, all)
		}
		if got := seen(down); got != "" {
			t.Fatalf("the hook that is down took %q past its failed first event", got)
		}
		clock.Lock()
		now = now.Add(2 * time.Hour)
		clock.Unlock()
		sendAll(t, r.hooks)
		if got := seen(down); got != all {
			t.Fatalf("the hook back up got %q; want %q", got, all)
		}
	})
}

// A message whose synchronous POST failed, run again (its append had
// failed, and it is appended again under its id) with a POST that
// succeeds, is not also queued under the failed POST's id: the hook has
// it once.
func TestASyncPostThatSucceedsOnRetryIsNotQueued(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		recv := newReceiver(t)
		recv.fails["message.user"] = 1
		r, s := syncRig(t, open(t), recv)
		id, err := uuid.NewV7()
		if err != nil {
			t.Fatal(err)
		}
		m := sessions.Message{ID: sessions.MessageID(id.String()), Role: sessions.RoleUser, Content: "again"}
		// The first try: its POST fails, and its append never commits.
		first := m
		r.hooks.Before(ctx, s.ID, &first)
		// The second: its POST succeeds, and it is stored.
		if _, err := r.store.Append(ctx, s.ID, m); err != nil {
			t.Fatal(err)
		}
		sendAll(t, r.hooks)
		recv.mu.Lock()
		took := len(recv.took)
		recv.mu.Unlock()
		if took != 1 {
			t.Fatalf("the hook took the message %d times; want once (its synchronous POST on the retry): %+v", took, recv.events())
		}
		// Both tries are one delivery to the receiver.
		if got := recv.events(); len(got) != 2 || got[0].ID != got[1].ID {
			t.Fatalf("the two tries' POSTs %+v; want one delivery id for both", got)
		}
	})
}
