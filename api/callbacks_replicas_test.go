package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/sessions"
)

// slowReceiver counts POSTs like countingReceiver, taking up to max to
// answer, so claims by the two senders interleave.
type slowReceiver struct {
	*countingReceiver
	max time.Duration
}

func (rc slowReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	time.Sleep(time.Duration(rand.Int64N(int64(rc.max))))
	rc.countingReceiver.ServeHTTP(w, r)
}

func runCallbacksWith(t *testing.T, opts api.CallbackOptions) {
	t.Helper()
	if opts.Bus == nil {
		opts.Bus = events.New()
	}
	opts.Secret, opts.Allow = callbackSecret, []string{"127.0.0.1"}
	if opts.Backoff == nil {
		opts.Backoff = func(int) time.Duration { return 0 }
	}
	if opts.Poll == 0 {
		opts.Poll = 2 * time.Millisecond
	}
	cb := api.NewCallbacks(opts)
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

// Two replicas, each with its own sender on its own database handle, POST
// each callback exactly once: a sender claims a callback with a lease and
// POSTs it only while the lease outlasts the POST. With a receiver slow
// next to the lease, a sender's batch outlasts the lease it was claimed
// with: the other sender takes the callbacks whose lease lapsed, and the
// first one, finding its claim gone, leaves them.
func TestCallbackSendersOnTwoReplicasPostEachOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		delay time.Duration // the receiver's longest answer
		lease time.Duration
	}{
		{"quick receiver", 200, 3 * time.Millisecond, 0},
		{"slow receiver next to the lease", 80, 60 * time.Millisecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbtest.EachTwoHandles(t, func(t *testing.T, a, b *dbutil.DB) {
				rc := newCountingReceiver()
				hook := newHookServer(t, slowReceiver{rc, tc.delay})
				t.Cleanup(hook.Close)
				st, s := hookedStore(t, a, time.Millisecond, hook.URL)
				for i := range tc.n {
					if _, err := st.Append(context.Background(), s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: fmt.Sprintf("reply %d", i)}); err != nil {
						t.Fatal(err)
					}
				}
				runCallbacksWith(t, api.CallbackOptions{DB: a, Store: st, Lease: tc.lease, Owner: "replica-a"})
				runCallbacksWith(t, api.CallbackOptions{DB: b, Store: sessions.NewStore(b), Lease: tc.lease, Owner: "replica-b"})
				waitFor(t, "every callback recorded as delivered", func() bool {
					var delivered int
					_ = a.Reader().QueryRow(`SELECT count(*) FROM api_callbacks WHERE status = 'delivered'`).Scan(&delivered)
					return delivered == tc.n
				})
				if d, total, twice := rc.counts(); d != tc.n || total != tc.n {
					t.Fatalf("%d replies got %d POSTs; posted twice (up to 5): %v", d, total, twice)
				}
			})
		})
	}
}

// A callback claimed by a sender that died before it recorded anything
// (its row leased to it) is left alone while the lease runs, then taken
// over by another sender and POSTed once.
func TestCallbackOfADeadSenderIsTakenOverWhenItsLeaseLapses(t *testing.T) {
	dbtest.EachTwoHandles(t, func(t *testing.T, a, b *dbutil.DB) {
		ctx := context.Background()
		rc := newCountingReceiver()
		hook := newHookServer(t, rc)
		t.Cleanup(hook.Close)
		st, s := hookedStore(t, a, time.Millisecond, hook.URL)
		reply, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "claimed, then the claimer died"})
		if err != nil {
			t.Fatal(err)
		}
		// What a sender on replica a leaves when it dies right after its
		// claim: one attempt counted, the row leased to it for a minute.
		const lease = time.Minute
		start := time.Now()
		if _, err := a.Writer().ExecContext(ctx, `UPDATE api_callbacks SET attempts = 1, lease_until = $1,
			claim_owner = 'replica-a', claim_instance = 'dead'`, dbutil.Millis(start.Add(lease))); err != nil {
			t.Fatal(err)
		}
		var skew atomic.Int64
		now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		runCallbacksWith(t, api.CallbackOptions{DB: b, Store: sessions.NewStore(b), Lease: lease, Owner: "replica-b", Now: now})

		// The other replica's sender looks for due callbacks a few times
		// (each look is a transaction) and leaves the leased one alone.
		looked := b.Transactions()
		waitFor(t, "the sender to look for due callbacks", func() bool { return b.Transactions() >= looked+5 })
		if _, total, _ := rc.counts(); total != 0 {
			t.Fatalf("a callback was POSTed %d times while another sender's lease on it ran", total)
		}

		skew.Store(int64(time.Since(start) + lease + time.Second)) // the lease lapses
		waitFor(t, "the callback recorded as delivered", func() bool {
			var status string
			_ = a.Reader().QueryRow(`SELECT status FROM api_callbacks`).Scan(&status)
			return status == api.CallbackDelivered
		})
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.posts[string(reply.ID)] != 1 || rc.total != 1 {
			t.Fatalf("posts %v, want one for %s", rc.posts, reply.ID)
		}
		var attempts int
		var owner string
		if err := a.Reader().QueryRow(`SELECT attempts, claim_owner FROM api_callbacks`).Scan(&attempts, &owner); err != nil ||
			attempts != 2 || owner != "replica-b" {
			t.Fatalf("attempts %d, claim_owner %q (%v); want the second attempt, replica-b's", attempts, owner, err)
		}
	})
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A sender that stops hands over at once: the POST that got through as it
// stopped is recorded (no other sender POSTs it again), and the callbacks
// it claimed and did not POST are released, so another replica's sender
// takes them without waiting for the lease (a minute) to lapse.
func TestStoppingCallbackSenderHandsOverAtOnce(t *testing.T) {
	dbtest.EachTwoHandles(t, func(t *testing.T, a, b *dbutil.DB) {
		rc := newCountingReceiver()
		hook := newHookServer(t, rc)
		t.Cleanup(hook.Close)
		st, s := hookedStore(t, a, time.Millisecond, hook.URL)
		const n = 3
		for i := range n {
			if _, err := st.Append(context.Background(), s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: fmt.Sprintf("reply %d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		// The first POST reaches the receiver; the sender is told to stop
		// before it hears the answer.
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var posts atomic.Int32
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			posts.Add(1)
			res, err := http.DefaultTransport.RoundTrip(r)
			stop()
			return res, err
		})}
		first := api.NewCallbacks(api.CallbackOptions{DB: a, Store: st, Bus: events.New(), Secret: callbackSecret,
			Client: client, Allow: []string{"127.0.0.1"}, Poll: 2 * time.Millisecond, Owner: "replica-a"})
		ran := make(chan error, 1)
		go func() { ran <- first.Run(ctx) }()
		select {
		case err := <-ran:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the first sender made no POST within 10s")
		}
		if got := posts.Load(); got != 1 {
			t.Fatalf("the stopping sender POSTed %d times, want 1", got)
		}

		runCallbacksWith(t, api.CallbackOptions{DB: b, Store: sessions.NewStore(b), Owner: "replica-b"})
		waitFor(t, "every callback recorded as delivered", func() bool {
			var delivered int
			_ = a.Reader().QueryRow(`SELECT count(*) FROM api_callbacks WHERE status = 'delivered'`).Scan(&delivered)
			return delivered == n
		})
		if d, total, twice := rc.counts(); d != n || total != n {
			t.Fatalf("%d replies got %d POSTs; posted twice: %v", d, total, twice)
		}
	})
}
