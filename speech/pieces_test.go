package speech

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// A request body of pieces reads, and writes itself, as the pieces one
// after the other, empty ones included, however it is read.
func TestPiecesReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces [][]byte
	}{
		{"none", nil},
		{"one", [][]byte{[]byte("form")}},
		{"head, audio, end", [][]byte{[]byte("--b\r\nhead\r\n\r\n"), bytes.Repeat([]byte{0xff, 0}, 40000), []byte("\r\n--b--\r\n")}},
		{"empty pieces", [][]byte{{}, []byte("a"), {}, {}, []byte("bc"), {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := bytes.Join(tc.pieces, nil)
			if err := iotest.TestReader(&piecesReader{p: tc.pieces}, want); err != nil {
				t.Errorf("Read: %v", err)
			}
			var buf bytes.Buffer
			n, err := io.Copy(&buf, &piecesReader{p: tc.pieces}) // through WriteTo
			if err != nil || n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("WriteTo wrote %d bytes, %v; want the %d of the pieces", n, err, len(want))
			}
		})
	}
}
