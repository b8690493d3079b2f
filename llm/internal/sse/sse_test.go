package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct {
	typ, data    string
	unterminated bool
}

func readAll(t *testing.T, r io.Reader) ([]ev, error) {
	t.Helper()
	sr := NewReader(r)
	var out []ev
	for {
		e, err := sr.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev{e.Type, string(e.Data), e.Unterminated})
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"openai", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []ev{{"", `{"a":1}`, false}, {"", "[DONE]", false}}},
		{"anthropic", "event: ping\ndata: {\"type\":\"ping\"}\n\nevent: message_stop\ndata: {}\n\n",
			[]ev{{"ping", `{"type":"ping"}`, false}, {"message_stop", "{}", false}}},
		{"no space after colon", "data:{\"a\":1}\n\n", []ev{{"", `{"a":1}`, false}}},
		{"crlf", "event: x\r\ndata: 1\r\n\r\n", []ev{{"x", "1", false}}},
		{"comments and keep-alives", ": OPENROUTER PROCESSING\n\n\n\n: ping\ndata: 1\n\n", []ev{{"", "1", false}}},
		{"multi-line data", "data: a\ndata: b\n\n", []ev{{"", "a\nb", false}}},
		{"ignored fields", "id: 7\nretry: 100\ndata: 1\n\n", []ev{{"", "1", false}}},
		{"event without data is dropped", "event: x\n\ndata: 1\n\n", []ev{{"", "1", false}}},
		{"last event without blank line", "data: 1\n\ndata: 2\n", []ev{{"", "1", false}, {"", "2", true}}},
		{"last line without newline", "data: 1\n\ndata: 2", []ev{{"", "1", false}, {"", "2", true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := readAll(t, r)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("err = %v", err)
				}
				if len(got) != len(tc.want) {
					t.Fatalf("events = %+v, want %+v", got, tc.want)
				}
				for i := range got {
					if got[i] != tc.want[i] {
						t.Errorf("event %d = %+v, want %+v", i, got[i], tc.want[i])
					}
				}
			}
		})
	}
}

func TestLongLine(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	got, err := readAll(t, strings.NewReader("data: "+long+"\n\n"))
	if !errors.Is(err, io.EOF) || len(got) != 1 || got[0].data != long {
		t.Fatalf("err %v, %d events", err, len(got))
	}
}

func TestTooLarge(t *testing.T) {
	_, err := readAll(t, strings.NewReader("data: "+strings.Repeat("x", MaxEventSize+1)+"\n\n"))
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want a size error", err)
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("reset")
	_, err := readAll(t, io.MultiReader(strings.NewReader("data: 1\n\ndata: par"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}
