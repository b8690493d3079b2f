package sessions_test

import (
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions/storetest"
)

func TestStoreSQLite(t *testing.T) { storetest.Run(t, dbtest.SQLite) }

func TestStorePostgres(t *testing.T) {
	dbtest.RequirePostgres(t)
	storetest.Run(t, dbtest.Postgres)
}
