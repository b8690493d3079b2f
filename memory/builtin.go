package memory

import (
	"context"
	"fmt"

	"github.com/parleyd/parley/dbutil"
)

// Builtin is the default index: full text inside the database itself, FTS5
// with bm25 ranking on SQLite (builtin_sqlite.go) and a GIN-indexed tsvector
// with ts_rank on PostgreSQL (builtin_postgres.go). Both use the 'simple'
// rules (no stemming, no stop words, any language) and break ties by recency.
//
// The database keeps it current inside each item's own transaction, so it
// needs no queue: its Upsert and Delete have nothing left to do.
//
// Its structures are not in the migrations: like a Typesense collection,
// they are derived data that this index creates when missing (filling them
// from memory_items) and that Reindex rebuilds. That also keeps the schema
// shape test comparing what the two engines share, since FTS5 brings its own
// shadow tables.
type Builtin struct {
	db *dbutil.DB
}

var _ inDatabase = (*Builtin)(nil)

// NewBuiltin returns the built-in index of db, creating its structures if
// they are missing. db must be migrated.
func NewBuiltin(ctx context.Context, db *dbutil.DB) (*Builtin, error) {
	b := &Builtin{db: db}
	var err error
	if db.Dialect == dbutil.Postgres {
		err = b.ensurePostgres(ctx)
	} else {
		err = b.ensureSQLite(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("set up the built-in memory index: %w", err)
	}
	return b, nil
}

// Name implements Index.
func (b *Builtin) Name() string { return "builtin" }

// Upsert implements Index. The item's own transaction already indexed it.
func (b *Builtin) Upsert(context.Context, Doc) error { return nil }

// Delete implements Index. The item's own transaction already removed it.
func (b *Builtin) Delete(context.Context, ItemID) error { return nil }

// Search implements Index.
func (b *Builtin) Search(ctx context.Context, scope Scope, text string, limit int) ([]Hit, error) {
	q, ok, err := searchQuery(scope, text, limit)
	if !ok {
		return nil, err
	}
	var hits []Hit
	if b.db.Dialect == dbutil.Postgres {
		hits, err = b.searchPostgres(ctx, scope, q, limit)
	} else {
		hits, err = b.searchSQLite(ctx, scope, q, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("search the built-in memory index: %w", err)
	}
	return hits, nil
}

func (b *Builtin) rebuild(ctx context.Context) (int, error) {
	var err error
	if b.db.Dialect == dbutil.Postgres {
		err = b.rebuildPostgres(ctx)
	} else {
		err = b.rebuildSQLite(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("rebuild the built-in memory index: %w", err)
	}
	var n int
	if err := b.db.Read().QueryRowContext(ctx, countItemsQuery).Scan(&n); err != nil {
		return 0, fmt.Errorf("count memory items: %w", err)
	}
	return n, nil
}

func scanHits(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close() error
}, negate bool) ([]Hit, error) {
	defer rows.Close()
	var hits []Hit
	for rows.Next() {
		var h Hit
		if err := rows.Scan(&h.ID, &h.Score); err != nil {
			return nil, err
		}
		if negate {
			h.Score = -h.Score
		}
		hits = append(hits, h)
	}
	return hits, rows.Err()
}
