package cluster

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A daemon alone (a nil *Node) elects nothing, runs everything here, and
// passes no request on, but still removes a client's hop header.
func TestNodeAlone(t *testing.T) {
	var n *Node
	if n.Elected("tg") || n.RunElsewhere("tg") {
		t.Fatal("a daemon alone elects its channels")
	}
	if got := n.ID("main"); got != "main" {
		t.Fatalf("ID = %q, want the configured name", got)
	}
	if n.Alive() != nil || n.Fenced() != nil || n.Member() != nil {
		t.Fatal("a daemon alone has a membership")
	}
	if list, err := n.Live(context.Background()); list != nil || err != nil {
		t.Fatalf("Live = %v, %v", list, err)
	}
	if err := n.Join(context.Background(), "", nil, "v"); err != nil {
		t.Fatal(err)
	}
	n.StartChannels(context.Background())
	n.LoseChannels("test")
	n.Leave(context.Background())
	var hop string
	h := n.ToHolder(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hop = r.Header.Get(HopHeader) }))
	req := httptest.NewRequest("GET", "/v1/sessions/x", nil)
	req.Header.Set(HopHeader, "forged")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if hop != "" {
		t.Fatalf("a client's hop header reached the API: %q", hop)
	}
}

// The address the others reach a replica at: the configured one, else
// the listener's, with the host name in place of an unspecified address.
func TestAdvertiseURL(t *testing.T) {
	if got := advertiseURL("http://a.example:8080", nil); got != "http://a.example:8080" {
		t.Fatalf("configured: %q", got)
	}
	if got := advertiseURL("", nil); got != "" {
		t.Fatalf("no listener: %q", got)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got, want := advertiseURL("", ln), "http://"+ln.Addr().String(); got != want {
		t.Fatalf("listener: %q, want %q", got, want)
	}
	any, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skip(err)
	}
	defer any.Close()
	if got := advertiseURL("", any); strings.Contains(got, "0.0.0.0") || !strings.HasPrefix(got, "http://") {
		t.Fatalf("unspecified address advertised: %q", got)
	}
}
