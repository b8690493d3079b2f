package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// A session's webhook_url is the API client's to choose, so a reply
// callback could be aimed at parley's own network: its loopback, the
// cloud's metadata address, a private service. Callbacks reach only
// public addresses unless http.callback_allow names the address (or its
// network, or the URL's host): checked on the address each connection is
// made to, so a name that resolves elsewhere later (DNS rebinding) is
// checked again, and redirects are never followed.

// specialNets are the networks, besides loopback, link-local, private,
// multicast and unspecified addresses, that no callback goes to unless
// allowed: "this network", carrier-grade NAT, IETF protocol assignments,
// benchmarking, reserved, and NAT64 (which maps to IPv4 addresses).
var specialNets = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// internal reports whether a is an address a callback may not reach by
// default.
func internal(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() || a.IsPrivate() || a.IsUnspecified() || !a.IsGlobalUnicast() {
		return true
	}
	for _, p := range specialNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// callbackPolicy is http.callback_allow: the networks and host names
// callbacks may reach although they are internal.
type callbackPolicy struct {
	nets  []netip.Prefix
	hosts map[string]bool
}

// ParseCallbackAllow reads http.callback_allow entries: an IP address, a
// CIDR network, or a host name (whose every address is then allowed).
func ParseCallbackAllow(entries []string) (callbackPolicy, error) {
	p := callbackPolicy{hosts: map[string]bool{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if pre, err := netip.ParsePrefix(e); err == nil {
			p.nets = append(p.nets, pre.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			a = a.Unmap()
			p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		if !validHostName(e) {
			return callbackPolicy{}, fmt.Errorf("%q is not an IP address, a CIDR network such as 10.0.0.0/8, or a host name", e)
		}
		p.hosts[strings.ToLower(strings.TrimSuffix(e, "."))] = true
	}
	return p, nil
}

func validHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

func (p callbackPolicy) allowsAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !internal(a) {
		return true
	}
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

func (p callbackPolicy) allowsHost(host string) bool {
	return p.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]
}

// ErrCallbackAddress is the error of a callback refused for its address.
var ErrCallbackAddress = errors.New("a loopback, link-local, private or reserved address, which callbacks don't reach unless http.callback_allow names it")

// allowedHostKey marks a dial whose URL host is in callback_allow.
type allowedHostKey struct{}

// policyClient is an HTTP client that connects only where the policy in
// force allows (read at each connection, so a reload's policy applies to
// the next one), checked on each connection's address, and follows no
// redirect.
func policyClient(policy func() callbackPolicy, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{
		Timeout: 10 * time.Second,
		ControlContext: func(ctx context.Context, network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return fmt.Errorf("callback address %q: %w", address, err)
			}
			a, err := netip.ParseAddr(host)
			if err != nil {
				return fmt.Errorf("callback address %q: %w", address, err)
			}
			if allowed, _ := ctx.Value(allowedHostKey{}).(bool); allowed || policy().allowsAddr(a) {
				return nil
			}
			return fmt.Errorf("connect to %s: %w", a.Unmap(), ErrCallbackAddress)
		},
	}
	transport := &http.Transport{
		Proxy: nil, // a proxy would connect for us, past the address check
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, err := net.SplitHostPort(addr); err == nil && policy().allowsHost(host) {
				ctx = context.WithValue(ctx, allowedHostKey{}, true)
			}
			return dialer.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Timeout:   timeout,
		Transport: transport,
		// A redirect could lead anywhere; the receiver's 3xx is its answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// checkURL says what is wrong with a reply callback URL: its form, and a
// literal address callbacks may not reach (a host name is checked on
// each connection).
func (p callbackPolicy) checkURL(raw string) error {
	if err := checkWebhookURL(raw); err != nil {
		return err
	}
	u, _ := url.Parse(raw)
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil && !p.allowsAddr(a) && !p.allowsHost(host) {
		return badRequest("webhook_url names " + a.Unmap().String() + ", " + ErrCallbackAddress.Error())
	}
	return nil
}

// checkCallbackURL checks a webhook_url being written to a session.
func (s *server) checkCallbackURL(raw string) error {
	if s.opts.Callbacks == nil {
		return badRequest("reply callbacks are not enabled on this server; create the session without webhook_url")
	}
	return s.opts.Callbacks.CheckURL(raw)
}

// checkMetadataWebhookURL checks the webhook_url of a metadata object
// merged into a session's (PATCH, branch), as creating one does; null
// removes it. A body that is not an object is the caller's to refuse.
func (s *server) checkMetadataWebhookURL(meta json.RawMessage) error {
	var obj map[string]json.RawMessage
	if len(meta) == 0 || json.Unmarshal(meta, &obj) != nil {
		return nil
	}
	v, ok := obj[MetadataWebhookURL]
	if !ok || string(v) == "null" {
		return nil
	}
	var raw string
	if err := json.Unmarshal(v, &raw); err != nil {
		return badRequest("metadata.webhook_url must be a string, or null to remove it")
	}
	return s.checkCallbackURL(raw)
}
