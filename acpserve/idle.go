package acpserve

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// streamIdle is how long a response may send nothing before it counts as
// lost: the API's event stream sends a ping every 15 s while a turn runs,
// so three missed pings mean the daemon or the network is gone.
const streamIdle = 45 * time.Second

// idleClient is hc (nil: the default client) whose responses end with an
// error once they send nothing for idle, so a prompt never waits
// on a stream that went silent.
func idleClient(hc *http.Client, idle time.Duration) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = idleTransport{base: base, idle: idle}
	return &c
}

type idleTransport struct {
	base http.RoundTripper
	idle time.Duration
}

func (t idleTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = newIdleBody(resp.Body, t.idle)
	return resp, nil
}

// idleBody closes its body when no Read returns bytes for idle.
type idleBody struct {
	body  io.ReadCloser
	timer *time.Timer
	idle  time.Duration

	mu      sync.Mutex
	expired bool
}

func newIdleBody(body io.ReadCloser, idle time.Duration) *idleBody {
	b := &idleBody{body: body, idle: idle}
	b.timer = time.AfterFunc(idle, func() {
		b.mu.Lock()
		b.expired = true
		b.mu.Unlock()
		body.Close()
	})
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 {
		b.timer.Reset(b.idle)
	}
	if err != nil && err != io.EOF {
		b.mu.Lock()
		expired := b.expired
		b.mu.Unlock()
		if expired {
			return n, fmt.Errorf("parley sent nothing for %s (not even its keep-alive ping)", b.idle)
		}
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.body.Close()
}
