package httpserve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The app server serves every route; with an ops listener, the health and
// metrics routes move there and the app server no longer has them.
func TestServersSplitOpsRoutes(t *testing.T) {
	answer := func(body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body) })
	}
	routes := Routes{V1: answer("api"), Metrics: answer("metrics"), MCP: answer("mcp"),
		Admin: func() http.Handler { return answer("admin") }, Log: slog.New(slog.DiscardHandler),
		Ready: ReadyOptions{Broken: func() error { return nil }}}
	for _, tc := range []struct {
		name string
		ops  bool
		app  map[string]string // path → body, "" for a 404
		opsW map[string]string
	}{
		{name: "one server", app: map[string]string{"/v1/x": "api", "/metrics": "metrics", "/mcp": "mcp", "/admin": "admin", "/healthz": "ok"}},
		{name: "ops server", ops: true,
			app:  map[string]string{"/v1/x": "api", "/mcp": "mcp", "/admin/x": "admin", "/metrics": "", "/healthz": ""},
			opsW: map[string]string{"/metrics": "metrics", "/healthz": "ok", "/v1/x": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opsAddr := ""
			if tc.ops {
				opsAddr = "127.0.0.1:0"
			}
			s, err := Listen("127.0.0.1:0", opsAddr)
			if err != nil {
				t.Fatal(err)
			}
			s.Serve(routes)
			check := func(addr string, want map[string]string) {
				t.Helper()
				for path, body := range want {
					resp, err := http.Get("http://" + addr + path)
					if err != nil {
						t.Fatal(err)
					}
					got, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					switch {
					case body == "" && resp.StatusCode != http.StatusNotFound:
						t.Errorf("%s on %s: %d %q, want 404", path, addr, resp.StatusCode, got)
					case body != "" && !strings.Contains(string(got), body):
						t.Errorf("%s on %s: %d %q, want %q", path, addr, resp.StatusCode, got, body)
					}
					if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
						t.Errorf("%s on %s: no security headers", path, addr)
					}
				}
			}
			check(s.Listener().Addr().String(), tc.app)
			if tc.ops {
				check(s.opsLn.Addr().String(), tc.opsW)
			}
			if err := s.Shutdown(context.Background(), time.Second); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			s.Close()
			if _, err := net.DialTimeout("tcp", s.Listener().Addr().String(), time.Second); err == nil {
				t.Error("the app's listener is open after Shutdown")
			}
			if tc.ops {
				if _, err := net.DialTimeout("tcp", s.opsLn.Addr().String(), time.Second); err == nil {
					t.Error("the ops listener is open after Close")
				}
			}
		})
	}
}

// A port in use fails Listen naming the key to change, and leaves nothing
// open; Close closes the listeners of servers that never served.
func TestServersListen(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if _, err := Listen(taken.Addr().String(), ""); err == nil || !strings.Contains(err.Error(), "set http.listen") {
		t.Fatalf("listen on a port in use: %v, want an error naming http.listen", err)
	}
	s, err := Listen("127.0.0.1:0", taken.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "set http.ops_listen") {
		t.Fatalf("ops_listen on a port in use: %v, want an error naming http.ops_listen", err)
	}
	if s, err = Listen("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, ln := range []net.Listener{s.ln, s.opsLn} {
		if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			t.Errorf("%s is open after Close", ln.Addr())
		}
	}
	var none *Servers
	none.Close()
	if none.Failed() != nil || none.Listener() != nil || none.Shutdown(context.Background(), time.Second) != nil {
		t.Error("a nil Servers (no HTTP) is not a no-op")
	}
}
