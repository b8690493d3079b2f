package whatsapp

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.mau.fi/whatsmeow/types"

	"github.com/parleyd/parley/adapters"
)

// Config is an adapter's own section of the config file. A WhatsApp
// adapter has no token: its credential is the linked device, kept in
// parley's database by `parley whatsapp link --adapter ID`.
//
//	adapters:
//	  - id: wa
//	    type: whatsapp
//	    device: "4915123456789"   # only needed with several linked numbers
type Config struct {
	// Device picks the linked device by its phone number (digits, with or
	// without "+", or the JID "4915123456789@s.whatsapp.net"). Empty means
	// the only (or first) device stored; set it when several WhatsApp
	// adapters share one database, one number each.
	Device string `yaml:"device"`
	// ReadReceipts sends a read receipt (blue ticks) once a message is
	// stored. Default true.
	ReadReceipts *bool `yaml:"read_receipts"`
	// Presence marks the account online when connected and shows
	// "typing…" while a reply is written. Default true.
	Presence *bool `yaml:"presence"`
	// Reconnect bounds the wait between connection attempts.
	Reconnect ReconnectConfig `yaml:"reconnect"`
}

// ReconnectConfig bounds the reconnect backoff; the wait doubles from Min
// to Max and starts again at Min once connected.
type ReconnectConfig struct {
	Min string `yaml:"min"` // a Go duration, default 2s
	Max string `yaml:"max"` // a Go duration, default 2m
}

// Defaults.
const (
	DefaultReconnectMin = 2 * time.Second
	DefaultReconnectMax = 2 * time.Minute
)

// settings is a validated Config with its defaults filled in.
type settings struct {
	device       string // the phone number (JID user) of the device, or ""
	readReceipts bool
	presence     bool
	reconnectMin time.Duration
	reconnectMax time.Duration
}

// parseConfig decodes and validates one adapter's section.
func parseConfig(decode adapters.Decoder) (settings, error) {
	var c Config
	if decode != nil {
		if err := decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return settings{}, fmt.Errorf("whatsapp settings: %w", err)
		}
	}
	s := settings{readReceipts: true, presence: true, reconnectMin: DefaultReconnectMin, reconnectMax: DefaultReconnectMax}
	if c.ReadReceipts != nil {
		s.readReceipts = *c.ReadReceipts
	}
	if c.Presence != nil {
		s.presence = *c.Presence
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if strings.TrimSpace(c.Device) != "" {
		user, err := phoneUser(c.Device)
		if err != nil {
			bad("device %q %v; use the linked phone number in international form, e.g. device: \"4915123456789\"", c.Device, err)
		}
		s.device = user
	}

	parse := func(key, raw string, def time.Duration) time.Duration {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return def
		}
		d, err := time.ParseDuration(raw)
		if err != nil || d < 100*time.Millisecond || d > 24*time.Hour {
			bad("reconnect.%s %q is not a duration from 100ms to 24h; use e.g. %s", key, raw, def)
			return def
		}
		return d
	}
	s.reconnectMin = parse("min", c.Reconnect.Min, DefaultReconnectMin)
	s.reconnectMax = parse("max", c.Reconnect.Max, DefaultReconnectMax)
	if s.reconnectMax < s.reconnectMin {
		bad("reconnect.max %s is below reconnect.min %s", s.reconnectMax, s.reconnectMin)
	}

	if len(problems) > 0 {
		return settings{}, errors.New(strings.Join(problems, "; "))
	}
	return s, nil
}

// phoneUser turns a phone number ("+49 151 2345-6789") or a phone JID
// ("4915123456789@s.whatsapp.net", with or without a device part) into
// the JID's user part, "4915123456789".
func phoneUser(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if strings.Contains(raw, "@") {
		jid, err := types.ParseJID(raw)
		if err != nil {
			return "", fmt.Errorf("is not a JID (%v)", err)
		}
		if jid.Server != types.DefaultUserServer {
			return "", fmt.Errorf("is not a phone-number JID (@%s)", types.DefaultUserServer)
		}
		raw = jid.User
	}
	digits := strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9':
			return r
		case r == '+' || r == ' ' || r == '-' || r == '(' || r == ')' || r == '.':
			return -1
		}
		return 'x'
	}, raw)
	switch {
	case strings.Contains(digits, "x"):
		return "", errors.New("has characters other than digits, spaces, +, -, ( and )")
	case strings.HasPrefix(digits, "0"):
		return "", errors.New("starts with 0: give the country code instead of a leading 0")
	case len(digits) < 7 || len(digits) > 15:
		return "", errors.New("is not 7 to 15 digits long")
	}
	return digits, nil
}
