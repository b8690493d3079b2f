// Package kv is session storage: the key/value pairs an agent keeps for the
// length of one session with the kv_get, kv_set, kv_list and kv_delete
// tools. Each session's pairs are its own (a tool call can only name keys
// of the session it runs in), bounded per value and per session, and
// deleted with the session. The API reads them.
package kv

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyd/parley/config"
)

// Defaults of Limits: the config's (sessions.kv).
const (
	DefaultMaxValueBytes   = config.DefaultKVMaxValueBytes
	DefaultMaxSessionBytes = config.DefaultKVMaxSessionBytes
	DefaultMaxKeys         = config.DefaultKVMaxKeys
	// MaxKeyBytes caps a key.
	MaxKeyBytes = 256
	// MaxListLimit caps one page of List.
	MaxListLimit = 1000
)

// Limits bound what one session may store. The config keys that set them
// are named in the errors a person meets.
type Limits struct {
	// MaxValueBytes caps one value, in bytes (sessions.kv.max_value_bytes).
	MaxValueBytes int `json:"max_value_bytes"`
	// MaxSessionBytes caps the keys and values of one session together, in
	// bytes (sessions.kv.max_session_bytes).
	MaxSessionBytes int `json:"max_session_bytes"`
	// MaxKeys caps the keys of one session (sessions.kv.max_keys).
	MaxKeys int `json:"max_keys"`
}

// DefaultLimits are the limits when the config sets none.
var DefaultLimits = Limits{MaxValueBytes: DefaultMaxValueBytes, MaxSessionBytes: DefaultMaxSessionBytes, MaxKeys: DefaultMaxKeys}

// withDefaults fills the zero limits with the defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = DefaultMaxValueBytes
	}
	if l.MaxSessionBytes <= 0 {
		l.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if l.MaxKeys <= 0 {
		l.MaxKeys = DefaultMaxKeys
	}
	return l
}

// Item is one stored pair. Size counts the bytes of key and value, as the
// session's limit does.
type Item struct {
	Key       string    `json:"key"`
	Value     *string   `json:"value,omitempty"`
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Usage is what a session stores, against its limits.
type Usage struct {
	Keys   int    `json:"keys"`
	Bytes  int64  `json:"bytes"`
	Limits Limits `json:"limits"`
}

// itemSize is what a pair counts against its session's limit.
func itemSize(key, value string) int64 { return int64(len(key) + len(value)) }

// CheckKey says what is wrong with key, wrapping ErrInvalidKey, or nil. A
// key is 1 to MaxKeyBytes bytes of UTF-8 without control characters, and
// not only spaces; "/" and "." are ordinary characters, for names such as
// "notes/2025-03".
func CheckKey(key string) error {
	switch {
	case strings.TrimSpace(key) == "":
		return fmt.Errorf("%w: a key must not be empty or only spaces", ErrInvalidKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: the key is %d bytes and the limit is %d; use a shorter key", ErrInvalidKey, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: the key is not valid UTF-8", ErrInvalidKey)
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: the key holds a control character (a line break, tab or NUL); use printable characters", ErrInvalidKey)
	}
	return nil
}

// encodeCursor and decodeCursor make a page's last key an opaque cursor.
func encodeCursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

func decodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || CheckKey(string(b)) != nil {
		return "", ErrBadCursor
	}
	return string(b), nil
}
