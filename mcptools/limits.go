package mcptools

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/parleyd/parley/textcut"
)

// errMessageTooLarge ends a connection whose server sent one message over
// its cap.
type errMessageTooLarge struct{ max int }

func (e errMessageTooLarge) Error() string {
	return fmt.Sprintf("the server sent a message over %d MiB (max_message_mb); the connection is closed", e.max>>20)
}

// capTransport caps each message of an HTTP server's responses: a JSON
// body is one message, and an event stream's messages end at a blank line.
type capTransport struct {
	max  int
	base http.RoundTripper
}

func (t capTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &capReader{rc: resp.Body, max: t.max}
	return resp, nil
}

// capReader fails once more than max bytes come without a blank line.
type capReader struct {
	rc   io.ReadCloser
	max  int
	run  int  // bytes since the last blank line
	nl   bool // the last byte read was '\n'
	done error
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.done != nil {
		return 0, c.done
	}
	n, err := c.rc.Read(p)
	for _, b := range p[:n] {
		switch {
		case b == '\n' && c.nl:
			c.run = 0
		case b == '\r':
			continue // "\r\n\r\n" ends an event too
		default:
			c.run++
		}
		c.nl = b == '\n'
		if c.run > c.max {
			c.done = errMessageTooLarge{max: c.max}
			return 0, c.done
		}
	}
	return n, err
}

func (c *capReader) Close() error { return c.rc.Close() }

// truncate is text cut to max bytes, with a note to the model saying it
// was, and how long the whole was (total, when more than text).
func truncate(text string, total, max int) string {
	if len(text) <= max && total <= max {
		return text
	}
	note := fmt.Sprintf("\n[parley: the tool's result was %d bytes; only the first %d are shown]", total, max)
	return textcut.Bytes(text, max, note)
}

// limitedBuilder collects a result's text, keeping at most max bytes and
// counting the rest.
type limitedBuilder struct {
	b     bytes.Buffer
	max   int
	total int
}

func (l *limitedBuilder) WriteString(s string) {
	l.total += len(s)
	if room := l.max - l.b.Len(); room > 0 {
		l.b.WriteString(s[:min(len(s), room)])
	}
}
