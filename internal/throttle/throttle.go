// Package throttle slows down guessing: it counts the failed attempts
// (a wrong password, a wrong webhook secret) each address makes, and once
// an address has failed too often within a window, refuses it until the
// window has passed, without checking what it sent.
package throttle

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// maxAddrs bounds the addresses remembered, so a flood from many
// addresses can't grow the map without end; past it the stalest go.
const maxAddrs = 10000

// Failures counts failed attempts per address.
type Failures struct {
	// Limit is how many failures an address may make within Window
	// before it is refused for the rest of the window.
	Limit  int
	Window time.Duration
	Now    func() time.Time // nil: time.Now

	mu    sync.Mutex
	addrs map[string]*record
}

type record struct {
	since    time.Time // when this window began
	failures int
}

// New returns a throttle that allows limit failures per address within
// window.
func New(limit int, window time.Duration) *Failures {
	return &Failures{Limit: limit, Window: window}
}

func (f *Failures) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Blocked says whether addr has failed too often and must wait, and for
// how long.
func (f *Failures) Blocked(addr string) (bool, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.addrs[addr]
	if !ok {
		return false, 0
	}
	now := f.now()
	if left := r.since.Add(f.Window).Sub(now); left > 0 {
		return r.failures >= f.Limit, left
	}
	delete(f.addrs, addr)
	return false, 0
}

// Fail counts a failed attempt from addr, and says whether addr is now
// blocked.
func (f *Failures) Fail(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.addrs == nil {
		f.addrs = map[string]*record{}
	}
	r, ok := f.addrs[addr]
	if !ok || !now.Before(r.since.Add(f.Window)) {
		if len(f.addrs) >= maxAddrs {
			f.sweepLocked(now)
		}
		r = &record{since: now}
		f.addrs[addr] = r
	}
	r.failures++
	return r.failures >= f.Limit
}

// Succeed forgets addr's failures.
func (f *Failures) Succeed(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.addrs, addr)
}

// sweepLocked drops the records whose window is over, and if none is,
// the oldest.
func (f *Failures) sweepLocked(now time.Time) {
	var oldest string
	var oldestAt time.Time
	for a, r := range f.addrs {
		if !now.Before(r.since.Add(f.Window)) {
			delete(f.addrs, a)
			continue
		}
		if oldest == "" || r.since.Before(oldestAt) {
			oldest, oldestAt = a, r.since
		}
	}
	if len(f.addrs) >= maxAddrs && oldest != "" {
		delete(f.addrs, oldest)
	}
}

// Addr is the address a request came from (its host, without the port).
func Addr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
