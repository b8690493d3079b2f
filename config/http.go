package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/parleyd/parley/config/section"
)

// Defaults of the http and log sections.
const (
	DefaultListen           = "127.0.0.1:8080"
	DefaultEventLogMB       = 4
	DefaultMaxTitleChars    = 200
	DefaultMaxMetadataBytes = 16 << 10
	DefaultLogLevel         = "info"
	DefaultLogFormat        = "text"
)

// HTTP configures the API and webhook listener.
type HTTP struct {
	Listen string `yaml:"listen"`
	// Tokens are the admin bearer tokens of the /v1 API; with none, the API
	// answers every request with 401.
	Tokens []Secret `yaml:"tokens"`
	// OpsListen, when set, serves /healthz, /readyz and /metrics on this
	// address instead of Listen (which keeps the API and webhooks).
	OpsListen string `yaml:"ops_listen"`
	// CallbackSecret signs the replies POSTed to an API session's
	// webhook_url; with none, sessions can't have one.
	CallbackSecret Secret `yaml:"callback_secret"`
	// EventLogMB bounds, in MiB, the run events the API keeps in memory for
	// its streams; past it the runs that finished first are dropped (a
	// replay of one is rebuilt from the database).
	EventLogMB int `yaml:"event_log_mb"`
	// MaxTitleChars and MaxMetadataBytes cap an API session's title (in
	// characters) and its metadata (in bytes of JSON).
	MaxTitleChars    int `yaml:"max_title_chars"`
	MaxMetadataBytes int `yaml:"max_metadata_bytes"`
	// CallbackAllow lists the IP addresses, CIDR networks and host names
	// reply callbacks may reach although they are loopback, link-local,
	// private or reserved; by default callbacks reach only public
	// addresses.
	CallbackAllow []string `yaml:"callback_allow"`
	// MCP serves parley as an MCP server at /mcp, to requests with one of
	// Tokens; true unless set to false.
	MCP bool `yaml:"mcp"`
	// TrustedProxies are the reverse proxies (IP addresses or CIDR
	// networks) whose X-Forwarded-For names the client: the guess
	// throttles and the logs use that address for their requests. None by
	// default: each request is its peer's.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// TrustedProxyPrefixes reads TrustedProxies: an address is a network of
// one host.
func (h HTTP) TrustedProxyPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range h.TrustedProxies {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address (10.0.0.2) nor a CIDR network (10.0.0.0/8)", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Log configures the daemon's logger.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn or error
	Format string `yaml:"format"` // text or json
}

// SetDefaults fills in the http section's absent settings.
func (h *HTTP) SetDefaults(set section.Set) {
	if strings.TrimSpace(h.Listen) == "" {
		h.Listen = DefaultListen
	}
	section.Default(&h.EventLogMB, set, "event_log_mb", DefaultEventLogMB)
	section.Default(&h.MaxTitleChars, set, "max_title_chars", DefaultMaxTitleChars)
	section.Default(&h.MaxMetadataBytes, set, "max_metadata_bytes", DefaultMaxMetadataBytes)
	if len(h.Tokens) == 0 {
		h.Tokens = nil // "tokens: []" is the same as leaving it out
	}
	if len(h.CallbackAllow) == 0 {
		h.CallbackAllow = nil
	}
	if len(h.TrustedProxies) == 0 {
		h.TrustedProxies = nil
	}
	if !set.Has("mcp") {
		h.MCP = true
	}
}

// Check reports the http section's problems.
func (h HTTP) Check(r section.Reporter) {
	if _, err := h.TrustedProxyPrefixes(); err != nil {
		r.Add("trusted_proxies", err.Error())
	}
	for i, t := range h.Tokens {
		if msg := weakSecret(t.Reveal(), "PARLEY_API_TOKEN"); msg != "" {
			r.Add(fmt.Sprintf("tokens[%d]", i), msg)
		}
	}
	if cs := h.CallbackSecret.Reveal(); cs != "" {
		if msg := weakSecret(cs, "PARLEY_CALLBACK_SECRET"); msg != "" {
			r.Add("callback_secret", msg+`, or leave it empty to turn reply callbacks off`)
		}
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"event_log_mb", h.EventLogMB}, {"max_title_chars", h.MaxTitleChars}, {"max_metadata_bytes", h.MaxMetadataBytes}} {
		if n.v < 1 {
			r.Add(n.key, fmt.Sprintf("%d is below 1; leave it out for the default", n.v))
		}
	}
	for i, e := range h.CallbackAllow {
		if !callbackAllowEntry(e) {
			r.Add(fmt.Sprintf("callback_allow[%d]", i), fmt.Sprintf(`%q is not an IP address, a CIDR network or a host name; use such as "10.0.0.0/8", "127.0.0.1" or "hooks.internal"`, e))
		}
	}
	const use = `; use host:port such as "127.0.0.1:8080", "[::1]:8080" or ":8080"`
	if h.OpsListen != "" {
		if _, _, err := net.SplitHostPort(h.OpsListen); err != nil {
			r.Add("ops_listen", fmt.Sprintf("%q is not host:port%s, or leave it empty to serve health and metrics on http.listen", h.OpsListen, use))
		}
	}
	_, port, err := net.SplitHostPort(h.Listen)
	if err != nil {
		r.Add("listen", fmt.Sprintf("%q is not host:port%s", h.Listen, use))
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		r.Add("listen", fmt.Sprintf("port %q is not a number from 0 to 65535%s", port, use))
	}
}

// SetDefaults fills in the log section's absent settings.
func (l *Log) SetDefaults(section.Set) {
	l.Level = section.Normalize(l.Level, DefaultLogLevel)
	l.Format = section.Normalize(l.Format, DefaultLogFormat)
}

// Check reports the log section's problems.
func (l Log) Check(r section.Reporter) {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		r.Add("level", fmt.Sprintf("%q is not a log level; use debug, info, warn or error", l.Level))
	}
	switch l.Format {
	case "text", "json":
	default:
		r.Add("format", fmt.Sprintf("%q is not a log format; use text or json", l.Format))
	}
}
