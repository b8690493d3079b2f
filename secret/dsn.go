package secret

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
)

// DSN is a database URL or connection string. Printing, logging and encoding
// it hide the password: the password in a URL's userinfo, and the value of a
// password= key in a query string or a key=value connection string. Only
// Reveal returns the real value.
type DSN string

// Reveal returns the connection string with its password, for the driver.
func (d DSN) Reveal() string { return string(d) }

// String returns the connection string with any password replaced by
// "[redacted]".
func (d DSN) String() string { return redactDSN(string(d)) }

// GoString keeps %#v from printing the password.
func (d DSN) GoString() string { return d.String() }

// LogValue keeps slog from printing the password.
func (d DSN) LogValue() slog.Value { return slog.StringValue(d.String()) }

// MarshalJSON encodes the Redacted form.
func (d DSN) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// MarshalYAML encodes the Redacted form.
func (d DSN) MarshalYAML() (any, error) { return d.String(), nil }

// Format prints the Redacted form for every verb.
func (d DSN) Format(f fmt.State, verb rune) { Format(f, verb, d.String()) }

// sensitiveKeys are query or key=value parameters whose values are hidden.
var sensitiveKeys = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "pass": true,
	"sslpassword": true, "_auth_pass": true, "key": true, "_key": true,
	"secret": true, "token": true,
}

// redactDSN hides the passwords in a URL, a path with a query string, or a
// key=value connection string. It works on text that does not parse, erring
// towards hiding too much.
func redactDSN(s string) string {
	if s == "" {
		return ""
	}
	scheme, rest, isURL := strings.Cut(s, "://")
	if !isURL {
		if kv := redactKeyValues(s); kv != s {
			return kv
		}
		if path, query, ok := strings.Cut(s, "?"); ok {
			return path + "?" + redactQuery(query)
		}
		return s
	}

	// Everything up to the last "@" is the userinfo, so an unescaped "/", "?"
	// or "#" in a password stays hidden; unless that "@" is inside a query
	// parameter, when the userinfo ends where net/url says it does.
	at := strings.LastIndex(rest, "@")
	if at >= 0 {
		if _, query, ok := strings.Cut(rest[:at], "?"); ok && strings.Contains(query, "=") {
			authority, _, _ := strings.Cut(rest, "?")
			authority, _, _ = strings.Cut(authority, "/")
			at = strings.LastIndex(authority, "@")
		}
	}
	if at >= 0 {
		if user, _, hasPassword := strings.Cut(rest[:at], ":"); hasPassword {
			scheme += "://" + user + ":" + Redacted
		} else {
			scheme += "://" + rest[:at]
		}
		scheme += "@"
		rest = rest[at+1:]
	} else {
		scheme += "://"
	}
	if before, query, ok := strings.Cut(rest, "?"); ok {
		query, fragment, hasFragment := strings.Cut(query, "#")
		rest = before + "?" + redactQuery(query)
		if hasFragment {
			rest += "#" + fragment
		}
	}
	return scheme + rest
}

// redactQuery hides sensitive values in a URL query, including SQLite's
// _pragma=key(...) family of encryption keys.
func redactQuery(q string) string {
	params := strings.Split(q, "&")
	for i, p := range params {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		key, err := url.QueryUnescape(k)
		if err != nil {
			key = k
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			value = v
		}
		value = strings.ToLower(strings.TrimSpace(value))
		if sensitiveKeys[strings.ToLower(key)] || strings.EqualFold(key, "_pragma") && isKeyPragma(value) {
			params[i] = k + "=" + Redacted
		}
	}
	return strings.Join(params, "&")
}

func isKeyPragma(v string) bool {
	for _, p := range []string{"key", "rekey", "hexkey", "hexrekey", "textkey"} {
		if strings.HasPrefix(v, p+"(") || strings.HasPrefix(v, p+"=") {
			return true
		}
	}
	return false
}

// redactKeyValues hides sensitive values in a libpq-style key=value string,
// where a value may be single-quoted with backslash escapes.
func redactKeyValues(s string) string {
	var b strings.Builder
	i := 0
	for i < len(s) {
		if isSpace(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[start:i]
		j := skipSpaces(s, i)
		if j >= len(s) || s[j] != '=' {
			b.WriteString(key) // a word that is not key=value
			continue
		}
		valueStart := skipSpaces(s, j+1)
		j = valueStart
		if j < len(s) && s[j] == '\'' {
			for j++; j < len(s) && s[j] != '\''; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			j++ // the closing quote
		} else {
			for ; j < len(s) && !isSpace(s[j]); j++ {
				if s[j] == '\\' {
					j++
				}
			}
		}
		j = min(j, len(s))
		if sensitiveKeys[strings.ToLower(key)] {
			b.WriteString(s[start:valueStart] + Redacted)
		} else {
			b.WriteString(s[start:j])
		}
		i = j
	}
	return b.String()
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpaces(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}
