package dbutil

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable takes the drivers' connection failures for an outage, and
// nothing else: a model provider's cut stream (a bare network error, an
// unexpected EOF) or a refused statement never is.
func TestUnavailable(t *testing.T) {
	netErr := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"admin shutdown", fmt.Errorf("append: %w", &pgconn.PgError{Code: "57P01"}), true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"disk full", &pgconn.PgError{Code: "53100"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"connect", &pgconn.ConnectError{}, true},
		{"bad conn", fmt.Errorf("query: %w", driver.ErrBadConn), true},
		{"a model stream cut short", fmt.Errorf("model openai/x: %w", io.ErrUnexpectedEOF), false},
		{"a model body read reset", fmt.Errorf("model openai/x: %w", netErr), false},
		{"an HTTP call", &url.Error{Op: "Post", URL: "http://x", Err: netErr}, false},
		{"cancelled", fmt.Errorf("append: %w", context.Canceled), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unavailable(tc.err); got != tc.want {
				t.Fatalf("Unavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
