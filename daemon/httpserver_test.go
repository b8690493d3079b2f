package daemon

import (
	"net/http"
	"testing"
)

// Every server parley runs bounds a slow client's headers, its whole
// request and an idle connection.
func TestHTTPServersHaveTimeouts(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("read header %s, read %s, idle %s: each must be set", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout)
	}
	if srv.ReadTimeout < srv.ReadHeaderTimeout {
		t.Fatalf("read timeout %s is shorter than the header timeout %s", srv.ReadTimeout, srv.ReadHeaderTimeout)
	}
}
