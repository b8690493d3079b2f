package adapters_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
)

// wokenContext is the moment a paused process wakes: its deadline has
// passed, and the timer that would close Done has not run yet.
type wokenContext struct {
	context.Context
	deadline time.Time
}

func (c wokenContext) Deadline() (time.Time, bool) { return c.deadline, true }

// A request whose deadline passed while it was on its way to the
// connection is not written, even before the context says it is done;
// one within its deadline is, body and all; and retries of a body are
// guarded as well.
func TestGuardDeadlineWritesNothingLate(t *testing.T) {
	var received atomic.Int32
	var last atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A platform acts on a request whose body arrived whole; net/http
		// may send a request's head before reading its body.
		b, err := io.ReadAll(r.Body)
		if err != nil || int64(len(b)) != r.ContentLength {
			return
		}
		received.Add(1)
		last.Store(string(b))
	}))
	defer srv.Close()
	guarded := &http.Client{Transport: adapters.GuardDeadline(http.DefaultTransport)}
	post := func(c *http.Client, ctx context.Context, body string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/sendMessage", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	// The guard is what refuses it: net/http alone writes it.
	woken := wokenContext{adapters.FenceWrites(context.Background()), time.Now().Add(-time.Second)}
	if err := post(http.DefaultClient, woken, "late"); err != nil {
		t.Fatalf("without the guard: %v", err)
	}
	if received.Load() != 1 {
		t.Fatalf("without the guard the platform received %d requests; the test's premise is that it gets the late one", received.Load())
	}
	err := post(guarded, woken, "late")
	if !errors.Is(err, adapters.ErrDeadlinePassed) {
		t.Fatalf("a late request through the guard: %v; want ErrDeadlinePassed", err)
	}
	if received.Load() != 1 {
		t.Fatalf("the guard let a late request through: the platform received %d", received.Load())
	}

	// Past the deadline between the check at the door and the body's
	// first read (the process paused inside the transport).
	wake := time.Now().Add(50 * time.Millisecond)
	paused := &http.Client{Transport: adapters.GuardDeadline(pausing{http.DefaultTransport, wake})}
	if err := post(paused, wokenContext{adapters.FenceWrites(context.Background()), wake}, "paused"); !errors.Is(err, adapters.ErrDeadlinePassed) {
		t.Fatalf("a request paused past its deadline inside the transport: %v; want ErrDeadlinePassed", err)
	}
	if received.Load() != 1 {
		t.Fatalf("the platform received the paused request")
	}

	// A deadline that is no fence (a send without replicas) is not
	// guarded: net/http's own checks are enough there.
	if err := post(guarded, wokenContext{context.Background(), time.Now().Add(-time.Second)}, "unfenced"); err != nil || received.Load() != 2 {
		t.Fatalf("an unfenced request: %v, received %d", err, received.Load())
	}
	ctx, cancel := context.WithTimeout(adapters.FenceWrites(context.Background()), time.Minute)
	defer cancel()
	if err := post(guarded, ctx, "in time"); err != nil {
		t.Fatal(err)
	}
	if received.Load() != 3 || last.Load() != "in time" {
		t.Fatalf("a request in time: received %d, last %q", received.Load(), last.Load())
	}
	// Without a deadline the guard stands aside.
	if err := post(guarded, context.Background(), "no deadline"); err != nil || last.Load() != "no deadline" {
		t.Fatalf("a request without a deadline: %v, last %q", err, last.Load())
	}
}

// pausing is a transport the process pauses in until the clock passes
// until, before it reads the request's body.
type pausing struct {
	base  http.RoundTripper
	until time.Time
}

func (p pausing) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(time.Until(p.until) + time.Millisecond)
	return p.base.RoundTrip(r)
}
