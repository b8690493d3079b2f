package api_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
)

// An unauthenticated request is answered while its body is still coming,
// without waiting for the rest.
func TestUnauthorizedIsAnsweredBeforeTheBody(t *testing.T) {
	hs := newAPIServer(t, api.New(api.Options{Tokens: []string{strings.Repeat("t", 40)}}))
	defer hs.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"ti")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body is held back: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("%d, want 401", resp.StatusCode)
	}
}
