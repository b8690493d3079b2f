package dbtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil"
)

const sqliteSchemaQuery = `
SELECT type || ' ' || name || ': ' || COALESCE(sql, '')
FROM sqlite_master
WHERE name NOT LIKE 'sqlite_%'
ORDER BY type, name`

// The schema name differs per test, so only schema-free facts are compared.
const postgresSchemaQuery = `
SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' null=' || is_nullable || ' default=' || COALESCE(column_default, '')
FROM information_schema.columns WHERE table_schema = current_schema()
UNION ALL
SELECT 'index ' || tablename || '.' || indexname || ': ' || replace(indexdef, current_schema() || '.', '')
FROM pg_indexes WHERE schemaname = current_schema()
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || '.' || conname || ': ' || replace(pg_get_constraintdef(oid), current_schema() || '.', '')
FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
ORDER BY 1`

// Schema dumps db's schema as sorted text, so two databases can be compared.
func Schema(t testing.TB, db *dbutil.DB) string {
	t.Helper()
	q := sqliteSchemaQuery
	if db.Dialect == dbutil.Postgres {
		q = postgresSchemaQuery
	}
	rows, err := db.Reader().QueryContext(context.Background(), q)
	if err != nil {
		t.Fatalf("dump schema: %v", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatalf("dump schema: %v", err)
		}
		fmt.Fprintln(&b, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("dump schema: %v", err)
	}
	return b.String()
}
