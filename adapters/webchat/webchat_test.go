package webchat

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// maxServedBytes bounds the web chat as a browser receives it: the whole
// page (markup, style and script in one file) compressed.
const maxServedBytes = 100 << 10

// The page a browser gets is gzipped and stays under 100 KB; a client
// that takes no gzip gets the same page uncompressed.
func TestPageSize(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	get := func(encoding string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		// Set by hand, so the client leaves the body as it came.
		req.Header.Set("Accept-Encoding", encoding)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	resp, wire := get("gzip, deflate, br")
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("a browser's request got Content-Encoding %q, Vary %q; want gzip", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(wire))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	plainResp, plain := get("identity")
	if plainResp.Header.Get("Content-Encoding") != "" || !bytes.Equal(plain, page) || !bytes.Equal(unzipped, page) {
		t.Fatalf("the page differs by encoding: %d bytes plain, %d unzipped, %d embedded", len(plain), len(unzipped), len(page))
	}
	// What is served, gzipped here too: the bound holds for the page
	// whoever compresses it.
	var again bytes.Buffer
	zw := gzip.NewWriter(&again)
	_, _ = zw.Write(plain)
	_ = zw.Close()
	t.Logf("the web chat: %d bytes, %d served gzipped, %d gzipped at the default level", len(plain), len(wire), again.Len())
	if len(wire) > maxServedBytes || again.Len() > maxServedBytes {
		t.Fatalf("the web chat is %d bytes gzipped (%d at the default level); keep it under %d", len(wire), again.Len(), maxServedBytes)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"gzip", true}, {"gzip, deflate, br", true}, {"br;q=1.0, GZIP;q=0.5", true},
		{"", false}, {"identity", false}, {"gzip;q=0", false}, {"gzip; q=0.000", false}, {"br, gzip; q=0", false}, {"x-gzip2", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", tc.header)
		if got := acceptsGzip(r); got != tc.want {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", tc.header, got, tc.want)
		}
	}
}
