package httpserve

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// ClientAddr takes the client from X-Forwarded-For only when the peer is a
// trusted proxy: the rightmost untrusted hop, never one a client could
// have written in front of it.
func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("::ffff:192.0.2.0/120"), netip.MustParsePrefix("fe80::/10")}
	var got string
	h := ClientAddr(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.RemoteAddr }), trusted)
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy", "203.0.113.7:5000", nil, "203.0.113.7:5000"},
		{"an untrusted peer's header is ignored", "203.0.113.7:5000", []string{"198.51.100.1"}, "203.0.113.7:5000"},
		{"one trusted proxy", "127.0.0.1:40000", []string{"198.51.100.1"}, "198.51.100.1:0"},
		{"a forged entry left of the real one", "127.0.0.1:40000", []string{"1.2.3.4, 198.51.100.1"}, "198.51.100.1:0"},
		{"two trusted proxies", "10.1.2.3:40000", []string{"198.51.100.9, 10.9.9.9"}, "198.51.100.9:0"},
		{"headers split over lines", "10.1.2.3:40000", []string{"1.2.3.4", "198.51.100.9, 10.9.9.9"}, "198.51.100.9:0"},
		{"every hop trusted", "10.1.2.3:40000", []string{"10.5.5.5, 10.9.9.9"}, "10.5.5.5:0"},
		{"a trusted proxy without the header", "127.0.0.1:40000", nil, "127.0.0.1:40000"},
		{"a hop written with its port", "127.0.0.1:40000", []string{"198.51.100.1:5000"}, "198.51.100.1:0"},
		{"an IPv6 hop written with its port", "127.0.0.1:40000", []string{"[2001:db8::5]:443"}, "[2001:db8::5]:0"},
		{"garbage in the header", "127.0.0.1:40000", []string{"unknown"}, "127.0.0.1:40000"},
		{"IPv6 through an IPv6 proxy", "[fd00::1]:443", []string{"2001:db8::5"}, "[2001:db8::5]:0"},
		{"an IPv4-mapped proxy", "[::ffff:127.0.0.1]:40000", []string{"198.51.100.1"}, "198.51.100.1:0"},
		{"a proxy in a network listed IPv4-mapped", "192.0.2.10:40000", []string{"198.51.100.1"}, "198.51.100.1:0"},
		{"an IPv4-mapped peer in a network listed IPv4-mapped", "[::ffff:192.0.2.10]:40000", []string{"198.51.100.1"}, "198.51.100.1:0"},
		{"a mapped hop in a network listed IPv4-mapped", "192.0.2.10:40000", []string{"198.51.100.1, ::ffff:192.0.2.11"}, "198.51.100.1:0"},
		{"a link-local proxy with its zone", "[fe80::1%eth0]:40000", []string{"198.51.100.1"}, "198.51.100.1:0"},
		{"a link-local hop with its zone", "10.1.2.3:40000", []string{"198.51.100.1, fe80::2%eth0"}, "198.51.100.1:0"},
		{"a zoned peer outside the trusted networks", "[2001:db8::1%eth0]:40000", []string{"198.51.100.1"}, "[2001:db8::1%eth0]:40000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got = ""
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got != c.want {
				t.Fatalf("RemoteAddr %q, want %q", got, c.want)
			}
		})
	}
	// With no proxy trusted, the header is never read.
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr, got = "127.0.0.1:40000", ""
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	ClientAddr(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.RemoteAddr }), nil).ServeHTTP(httptest.NewRecorder(), r)
	if got != "127.0.0.1:40000" {
		t.Fatalf("with no trusted proxy, RemoteAddr %q", got)
	}
}
