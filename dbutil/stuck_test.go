package dbutil_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

// parley sets idle_in_transaction_session_timeout and lock_timeout on
// each PostgreSQL connection (StuckAfter), unless database.url sets them:
// a transaction left idle (its process paused) is ended by the server,
// and holds up the others' locks no longer.
func TestPostgresConnectionsEndStuckTransactions(t *testing.T) {
	ctx := context.Background()
	url := dbtest.PostgresURL(t)
	db, err := dbutil.Open(ctx, dbutil.Options{URL: url, StuckAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range []string{"idle_in_transaction_session_timeout", "lock_timeout"} {
		var v string
		if err := db.Read().QueryRowContext(ctx, "SHOW "+name).Scan(&v); err != nil || v != "300ms" {
			t.Fatalf("%s = %q (%v); want 300ms", name, v, err)
		}
	}
	err = db.Tx(ctx, func(q dbutil.Querier) error {
		if _, err := q.ExecContext(ctx, "CREATE TABLE stuck (n INT)"); err != nil {
			return err
		}
		time.Sleep(time.Second) // idle in the transaction, as a paused process
		_, err := q.ExecContext(ctx, "INSERT INTO stuck VALUES (1)")
		return err
	})
	if err == nil {
		t.Fatal("a transaction idle past StuckAfter committed; want it ended by the server")
	}
	// database.url's own setting wins.
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	own, err := dbutil.Open(ctx, dbutil.Options{URL: url + sep + "lock_timeout=1234", StuckAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	var v string
	if err := own.Read().QueryRowContext(ctx, "SHOW lock_timeout").Scan(&v); err != nil || v != "1234ms" {
		t.Fatalf("lock_timeout with database.url's own = %q (%v); want 1234ms", v, err)
	}
}
