package webhooks

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil/dbtest"
)

const guardHooks = hmacHook + "  - id: tok\n    auth: token\n    secret: " + secret + "\n    prompt: \"hi\"\n"

// slowPost sends a request's headers and the first bytes of a body of n
// bytes, and no more: a slow or stalled sender. It returns the connection.
func slowPost(t *testing.T, addr, method, path string, hdr map[string]string, body []byte, n int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, addr, n)
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.Write(body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// answer reads the response on conn, failing if none comes within wait.
func answer(t *testing.T, conn net.Conn, wait time.Duration) *http.Response {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within %s while the body is held back: %v", wait, err)
	}
	resp.Body.Close()
	return resp
}

// What the headers can refuse is refused while the body is still coming,
// and the answer doesn't wait for the rest of it.
func TestRefusedBeforeTheBody(t *testing.T) {
	_, k, hs := setupGuarded(t, dbtest.SQLite(t), guardHooks, false, nil, func(o *Options) { o.BodyTimeout = time.Minute })
	addr := strings.TrimPrefix(hs.URL, "http://")
	body := []byte(`{"repo":"parley"}`)
	stale := signed(body, time.Now().Add(-time.Hour))
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		status             int
	}{
		{"unknown hook", "POST", "/hooks/nope", signed(body, time.Now()), 404},
		{"wrong method", "PUT", "/hooks/ci", signed(body, time.Now()), 404},
		{"wrong token", "POST", "/hooks/tok", map[string]string{"Authorization": "Bearer wrong"}, 401},
		{"no token", "POST", "/hooks/tok", nil, 401},
		{"unsigned", "POST", "/hooks/ci", nil, 401},
		{"stale", "POST", "/hooks/ci", stale, 401},
		{"over 1 MiB", "POST", "/hooks/ci", signed(body, time.Now()), 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 1000
			if tc.status == 413 {
				n = MaxBody + 1
			}
			conn := slowPost(t, addr, tc.method, tc.path, tc.hdr, []byte(`{"re`), n)
			if resp := answer(t, conn, 5*time.Second); resp.StatusCode != tc.status {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	if n := len(k.delivered()); n != 0 {
		t.Fatalf("%d deliveries started", n)
	}
}

// An unknown hook and a wrong method get the same answer, so hook ids
// can't be found by asking.
func TestWrongMethodAnsweredAsUnknownHook(t *testing.T) {
	_, _, hs := setupGuarded(t, dbtest.SQLite(t), guardHooks, false, nil)
	get := func(method, path string) string {
		req, _ := http.NewRequest(method, hs.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s allow=%q", resp.StatusCode, b, resp.Header.Get("Allow"))
	}
	want := get("POST", "/hooks/nope")
	if !strings.HasPrefix(want, "404 ") {
		t.Fatalf("unknown hook: %s", want)
	}
	for _, c := range [][2]string{{"GET", "/hooks/ci"}, {"PUT", "/hooks/tok"}, {"DELETE", "/hooks/ci"}, {"GET", "/hooks/nope"}} {
		if got := get(c[0], c[1]); got != want {
			t.Fatalf("%s %s: %s, want %s", c[0], c[1], got, want)
		}
	}
}

// A body that doesn't arrive within BodyTimeout is cut off.
func TestSlowBodyIsCutOff(t *testing.T) {
	_, k, hs := setupGuarded(t, dbtest.SQLite(t), guardHooks, false, nil, func(o *Options) { o.BodyTimeout = 300 * time.Millisecond })
	addr := strings.TrimPrefix(hs.URL, "http://")
	body := []byte(`{"repo":"parley"}`)
	conn := slowPost(t, addr, "POST", "/hooks/ci", signed(body, time.Now()), body[:4], len(body))
	if resp := answer(t, conn, 10*time.Second); resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("%d, want 408", resp.StatusCode)
	}
	if n := len(k.delivered()); n != 0 {
		t.Fatalf("%d deliveries started", n)
	}
}

// A hook reads at most MaxPendingBodies unchecked bodies at once; one more
// is refused at once with 429, a token hook's (checked) requests are not
// held up, and the hook takes requests again once the slow ones go.
func TestPendingBodiesAreCapped(t *testing.T) {
	srv, k, hs := setupGuarded(t, dbtest.SQLite(t), guardHooks, false, nil, func(o *Options) {
		o.BodyTimeout, o.MaxPendingBodies = time.Minute, 2
	})
	addr := strings.TrimPrefix(hs.URL, "http://")
	body := []byte(`{"repo":"parley"}`)
	var slow []net.Conn
	for range 2 {
		slow = append(slow, slowPost(t, addr, "POST", "/hooks/ci", signed(body, time.Now()), body[:4], len(body)))
	}
	waitFor(t, func() bool { return len(srv.pendingSlots("ci")) == 2 })
	req, _ := http.NewRequest("POST", hs.URL+"/hooks/ci", strings.NewReader(string(body)))
	for key, v := range signed(body, time.Now()) {
		req.Header.Set(key, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var refusal struct{ Error struct{ Code string } }
	_ = json.NewDecoder(resp.Body).Decode(&refusal)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || refusal.Error.Code != "too_many_requests" {
		t.Fatalf("a third pending body: %d %q, Retry-After %q", resp.StatusCode, refusal.Error.Code, resp.Header.Get("Retry-After"))
	}
	if status, out := post(t, hs.URL+"/hooks/tok", []byte(`{}`), map[string]string{"Authorization": "Bearer " + secret}); status != 202 {
		t.Fatalf("token hook while ci is full: %d %v", status, out)
	}
	for _, c := range slow {
		c.Close()
	}
	waitFor(t, func() bool { return len(srv.pendingSlots("ci")) == 0 })
	if status, out := post(t, hs.URL+"/hooks/ci", body, signed(body, time.Now())); status != 202 {
		t.Fatalf("after the slow senders left: %d %v", status, out)
	}
	if n := len(k.delivered()); n != 2 {
		t.Fatalf("%d deliveries started, want 2", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
