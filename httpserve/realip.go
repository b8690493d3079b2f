package httpserve

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr serves h with each request's RemoteAddr set to the client
// behind the reverse proxies trusted names (http.trusted_proxies), so the
// guess throttles, the refusal records and the logs see the person's
// address rather than the proxy's. A request whose peer is not trusted
// keeps its RemoteAddr, whatever X-Forwarded-For it carries: only a
// trusted proxy's word is taken. With none trusted it returns h.
//
// The client is the rightmost address of X-Forwarded-For that is not a
// trusted proxy (each proxy appends the address it was reached from, so
// the entries left of the first untrusted one may be forged), or the
// leftmost if every entry is trusted.
func ClientAddr(h http.Handler, trusted []netip.Prefix) http.Handler {
	if len(trusted) == 0 {
		return h
	}
	// Addresses are matched unmapped and without their zone (netip's
	// Contains matches neither a mapped address against an IPv4 network
	// nor a zoned one at all), so the networks are unmapped too.
	nets := make([]netip.Prefix, len(trusted))
	for i, p := range trusted {
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		nets[i] = p
	}
	isTrusted := func(a netip.Addr) bool {
		a = a.Unmap().WithZone("")
		for _, p := range nets {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer, ok := hostAddr(r.RemoteAddr)
		if !ok || !isTrusted(peer) {
			h.ServeHTTP(w, r)
			return
		}
		var hops []netip.Addr
		for _, v := range r.Header.Values("X-Forwarded-For") {
			for f := range strings.SplitSeq(v, ",") {
				a, err := hopAddr(strings.TrimSpace(f))
				if err != nil {
					// A hop that isn't an address: nothing left of it can
					// be placed; the client is the proxy's peer.
					hops = nil
					continue
				}
				hops = append(hops, a.Unmap())
			}
		}
		if len(hops) == 0 {
			h.ServeHTTP(w, r)
			return
		}
		client := hops[0]
		for i := len(hops) - 1; i >= 0; i-- {
			if !isTrusted(hops[i]) {
				client = hops[i]
				break
			}
		}
		r2 := r.Clone(r.Context())
		r2.RemoteAddr = net.JoinHostPort(client.String(), "0")
		h.ServeHTTP(w, r2)
	})
}

// hostAddr is the address of a RemoteAddr ("host:port", or a bare host).
func hostAddr(remote string) (netip.Addr, bool) {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	return a, err == nil
}

// hopAddr is an X-Forwarded-For entry's address: bare, or with a port as
// some proxies write it ("198.51.100.1:5000", "[2001:db8::5]:443").
func hopAddr(f string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(f); err == nil {
		return ap.Addr(), nil
	}
	return netip.ParseAddr(f)
}
