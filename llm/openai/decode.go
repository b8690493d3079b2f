package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeChunk reads one chunk into c. It is a small hand-written JSON
// reader for the few fields parley uses, skipping the rest: a turn reads
// several chunks, and encoding/json (which validates the whole chunk, then
// decodes it by reflection) cost more CPU than the rest of reading the
// stream. It reads what encoding/json would, and fails where it would (a
// differential test holds it to that), except that keys match exactly
// (encoding/json also matches them case-insensitively). null reads as the
// zero value.
func decodeChunk(data []byte, c *chunk) error {
	d := decoder{data: data}
	if err := d.object(func(key []byte) error {
		switch string(key) {
		case "model":
			return d.str(&c.Model)
		case "choices":
			c.Choices = c.Choices[:0]
			return d.array(func() error {
				c.Choices = append(c.Choices, choice{})
				return d.choice(&c.Choices[len(c.Choices)-1])
			})
		case "usage":
			if d.null() {
				return nil
			}
			c.Usage = new(usageJSON)
			return d.usage(c.Usage)
		case "error":
			raw, err := d.raw()
			c.Error = raw
			return err
		}
		return d.skip()
	}); err != nil {
		return err
	}
	d.ws()
	if d.i != len(d.data) {
		return d.errorf("data after the chunk")
	}
	return nil
}

func (d *decoder) choice(ch *choice) error {
	return d.object(func(key []byte) error {
		switch string(key) {
		case "index":
			return d.int(&ch.Index)
		case "delta":
			return d.delta(&ch.Delta)
		case "message":
			if d.null() {
				return nil
			}
			ch.Message = new(delta)
			return d.delta(ch.Message)
		case "finish_reason":
			return d.str(&ch.FinishReason)
		}
		return d.skip()
	})
}

func (d *decoder) delta(dl *delta) error {
	return d.object(func(key []byte) error {
		switch string(key) {
		case "content":
			return d.str(&dl.Content)
		case "refusal":
			return d.str(&dl.Refusal)
		case "tool_calls":
			dl.ToolCalls = dl.ToolCalls[:0]
			return d.array(func() error {
				dl.ToolCalls = append(dl.ToolCalls, toolCallDelta{})
				return d.toolCall(&dl.ToolCalls[len(dl.ToolCalls)-1])
			})
		}
		return d.skip()
	})
}

func (d *decoder) toolCall(tc *toolCallDelta) error {
	return d.object(func(key []byte) error {
		switch string(key) {
		case "index":
			if d.null() {
				return nil
			}
			tc.Index = new(int)
			return d.int(tc.Index)
		case "id":
			return d.str(&tc.ID)
		case "function":
			return d.object(func(key []byte) error {
				switch string(key) {
				case "name":
					return d.str(&tc.Function.Name)
				case "arguments":
					raw, err := d.raw()
					tc.Function.Arguments = raw
					return err
				}
				return d.skip()
			})
		}
		return d.skip()
	})
}

func (d *decoder) usage(u *usageJSON) error {
	return d.object(func(key []byte) error {
		switch string(key) {
		case "prompt_tokens":
			return d.int64(&u.PromptTokens)
		case "completion_tokens":
			return d.int64(&u.CompletionTokens)
		case "prompt_cache_hit_tokens":
			return d.int64(&u.PromptCacheHitTokens)
		case "prompt_tokens_details":
			return d.object(func(key []byte) error {
				switch string(key) {
				case "cached_tokens":
					return d.int64(&u.PromptTokensDetails.CachedTokens)
				case "cache_write_tokens":
					return d.int64(&u.PromptTokensDetails.CacheWriteTokens)
				}
				return d.skip()
			})
		case "completion_tokens_details":
			return d.object(func(key []byte) error {
				if string(key) == "reasoning_tokens" {
					return d.int64(&u.CompletionTokensDetails.ReasoningTokens)
				}
				return d.skip()
			})
		}
		return d.skip()
	})
}

// decoder reads JSON values from data at i.
type decoder struct {
	data []byte
	i    int
	key  []byte // scratch for keys with escapes
}

var errSyntax = errors.New("invalid JSON")

func (d *decoder) errorf(what string) error {
	return fmt.Errorf("%w at offset %d: %s", errSyntax, d.i, what)
}

func (d *decoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// null consumes a null if one is next.
func (d *decoder) null() bool {
	d.ws()
	if bytes.HasPrefix(d.data[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// object calls field for each key, with the decoder at the key's value,
// which field must consume. null is an empty object.
func (d *decoder) object(field func(key []byte) error) error {
	if empty, err := d.open('{', '}', "object"); empty || err != nil {
		return err
	}
	for {
		d.ws()
		key, err := d.strBytes()
		if err != nil {
			return err
		}
		d.ws()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return d.errorf("want a colon")
		}
		d.i++
		if err := field(key); err != nil {
			return err
		}
		if more, err := d.more('}', "object"); !more || err != nil {
			return err
		}
	}
}

// array calls elem for each element. null is an empty array.
func (d *decoder) array(elem func() error) error {
	if empty, err := d.open('[', ']', "array"); empty || err != nil {
		return err
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if more, err := d.more(']', "array"); !more || err != nil {
			return err
		}
	}
}

// open consumes the start of an object or array (what), and reports
// whether it is empty: null, or closed at once.
func (d *decoder) open(opening, closing byte, what string) (empty bool, err error) {
	if d.null() {
		return true, nil
	}
	if d.i >= len(d.data) || d.data[d.i] != opening {
		return false, d.errorf("want an " + what)
	}
	d.i++
	d.ws()
	if d.i < len(d.data) && d.data[d.i] == closing {
		d.i++
		return true, nil
	}
	return false, nil
}

// more consumes what follows a member of an object or array (what): a
// comma, when another member follows, or the closing byte.
func (d *decoder) more(closing byte, what string) (bool, error) {
	d.ws()
	if d.i >= len(d.data) {
		return false, d.errorf(what + " not closed")
	}
	switch d.data[d.i] {
	case ',':
		d.i++
		return true, nil
	case closing:
		d.i++
		return false, nil
	}
	return false, d.errorf("want a comma or " + string(closing))
}

// str reads a string (or null, leaving *s as it was).
func (d *decoder) str(s *string) error {
	if d.null() {
		return nil
	}
	b, err := d.strBytes()
	if err != nil {
		return err
	}
	*s = string(b)
	return nil
}

// strBytes reads a string; the result is valid until the next call.
func (d *decoder) strBytes() ([]byte, error) {
	if d.i >= len(d.data) || d.data[d.i] != '"' {
		return nil, d.errorf("want a string")
	}
	start := d.i + 1
	for j := start; j < len(d.data); j++ {
		switch c := d.data[j]; {
		case c == '"':
			d.i = j + 1
			return d.validUTF8(d.data[start:j]), nil
		case c == '\\':
			return d.unescape(start)
		case c < 0x20:
			d.i = j
			return nil, d.errorf("control character in string")
		}
	}
	return nil, d.errorf("string not closed")
}

// unescape decodes a string with escapes that starts at start.
func (d *decoder) unescape(start int) ([]byte, error) {
	out := d.key[:0]
	for j := start; j < len(d.data); {
		c := d.data[j]
		switch {
		case c == '"':
			d.i = j + 1
			d.key = out
			return d.validUTF8(out), nil
		case c < 0x20:
			d.i = j
			return nil, d.errorf("control character in string")
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(d.data) {
			break
		}
		e := d.data[j+1]
		j += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(d.data, j)
			if !ok {
				d.i = j
				return nil, d.errorf("bad \\u escape")
			}
			j += 4
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(-1), false
				if j+6 <= len(d.data) && d.data[j] == '\\' && d.data[j+1] == 'u' {
					r2, ok2 = hex4(d.data, j+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
					j += 6
					r = dec
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			d.i = j - 1
			return nil, d.errorf("bad escape")
		}
	}
	d.i = len(d.data)
	return nil, d.errorf("string not closed")
}

// validUTF8 replaces each invalid byte with U+FFFD, as encoding/json does.
func (d *decoder) validUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		out = utf8.AppendRune(out, r) // RuneError for an invalid byte
		b = b[size:]
	}
	return out
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number returns the bytes of the JSON number at i.
func (d *decoder) number() ([]byte, error) {
	start := d.i
	for d.i < len(d.data) {
		switch c := d.data[d.i]; {
		case '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			d.i++
			continue
		}
		break
	}
	n := d.data[start:d.i]
	if len(n) == 0 || !json.Valid(n) {
		return nil, d.errorf("want a number")
	}
	return n, nil
}

func (d *decoder) int64(v *int64) error {
	if d.null() {
		return nil
	}
	n, err := d.number()
	if err != nil {
		return err
	}
	x, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return d.errorf("want an integer")
	}
	*v = x
	return nil
}

func (d *decoder) int(v *int) error {
	if d.null() {
		return nil
	}
	var x int64
	if err := d.int64(&x); err != nil {
		return err
	}
	if int64(int(x)) != x {
		return d.errorf("integer out of range")
	}
	*v = int(x)
	return nil
}

// raw returns the next value's bytes, unparsed but checked.
func (d *decoder) raw() ([]byte, error) {
	d.ws()
	start := d.i
	if err := d.skip(); err != nil {
		return nil, err
	}
	return append([]byte(nil), d.data[start:d.i]...), nil
}

// skip consumes one value of any type.
func (d *decoder) skip() error {
	d.ws()
	if d.i >= len(d.data) {
		return d.errorf("want a value")
	}
	switch c := d.data[d.i]; {
	case c == '{':
		return d.object(func([]byte) error { return d.skip() })
	case c == '[':
		return d.array(d.skip)
	case c == '"':
		_, err := d.strBytes()
		return err
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	default:
		_, err := d.number()
		return err
	}
}

func (d *decoder) literal(lit string) error {
	if !bytes.HasPrefix(d.data[d.i:], []byte(lit)) {
		return d.errorf("bad literal")
	}
	d.i += len(lit)
	return nil
}
