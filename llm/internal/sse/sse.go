// Package sse reads a text/event-stream response body, as the providers'
// streaming APIs send it.
//
// It follows the WHATWG event-stream format, with the leniency real servers
// need:
//   - "data:" with or without the space after the colon (some
//     OpenAI-compatible servers write "data:{...}");
//   - comment lines (": keep-alive", OpenRouter's ": OPENROUTER PROCESSING")
//     and blank keep-alive lines are skipped;
//   - CRLF and LF line endings;
//   - a last event that the server ended with EOF instead of a blank line is
//     still returned, marked Unterminated, so the caller can tell a complete
//     final chunk from one cut off mid-line.
//
// id and retry fields are ignored: the providers never resume a stream.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxEventSize bounds one event's data, so a broken server cannot make the
// reader buffer without end.
const MaxEventSize = 8 << 20

// Event is one dispatched event.
type Event struct {
	// Type is the event field ("" when the server sent none).
	Type string
	// Data is the data lines joined with "\n". It is valid until the next
	// call to Next.
	Data []byte
	// Unterminated is set on an event ended by EOF rather than a blank
	// line.
	Unterminated bool
}

// Reader reads events one at a time.
type Reader struct {
	r       *bufio.Reader
	data    bytes.Buffer
	line    []byte
	typ     string
	hasData bool
}

// bufPool recycles the line buffers: a daemon reads one stream per model
// call.
var bufPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// NewReader returns a Reader over r. Call Release when done with it.
func NewReader(r io.Reader) *Reader {
	br := bufPool.Get().(*bufio.Reader)
	br.Reset(r)
	return &Reader{r: br}
}

// Release returns the Reader's buffer for reuse; the Reader, and the Data
// of the last event, must not be used after it.
func (r *Reader) Release() {
	if r.r != nil {
		r.r.Reset(nil)
		bufPool.Put(r.r)
		r.r = nil
	}
}

// Next returns the next event. At the end of the stream it returns io.EOF;
// any other error is the underlying reader's (or a too-large event).
func (r *Reader) Next() (Event, error) {
	r.data.Reset()
	r.typ = ""
	r.hasData = false
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if len(line) > 0 {
					r.field(line)
				}
				if r.hasData {
					return Event{Type: r.typ, Data: r.data.Bytes(), Unterminated: true}, nil
				}
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if r.hasData {
				return Event{Type: r.typ, Data: r.data.Bytes()}, nil
			}
			r.typ = "" // an event with no data is not dispatched
			continue
		}
		if err := r.field(line); err != nil {
			return Event{}, err
		}
	}
}

// field applies one non-empty line.
func (r *Reader) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment / keep-alive
	}
	name, value, found := bytes.Cut(line, []byte{':'})
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if r.hasData {
			r.data.WriteByte('\n')
		}
		r.hasData = true
		if r.data.Len()+len(value) > MaxEventSize {
			return fmt.Errorf("sse: event larger than %d bytes", MaxEventSize)
		}
		r.data.Write(value)
	case "event":
		r.typ = string(value)
	}
	return nil
}

// readLine returns the next line without its line ending. At EOF it returns
// what was left (possibly empty) with io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		chunk, err := r.r.ReadSlice('\n')
		switch {
		case err == nil:
			if len(r.line) == 0 {
				return trimEOL(chunk), nil // the common case: no copy
			}
			r.line = append(r.line, chunk...)
			return trimEOL(r.line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.line = append(r.line, chunk...)
			if len(r.line) > MaxEventSize {
				return nil, fmt.Errorf("sse: line longer than %d bytes", MaxEventSize)
			}
		default:
			r.line = append(r.line, chunk...)
			return trimEOL(r.line), err
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}
