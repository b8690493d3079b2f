package memory

import (
	"context"

	"github.com/parleyd/parley/dbutil"
)

// SQLite: an FTS5 table over memory_items (external content, keyed by
// doc_id, so the text is stored once), kept in step by triggers that run in
// the writing transaction. The scope key is a column of its own, matched as
// one token, so a search reads only its scope's postings.
const (
	sqliteFTSExistsQuery = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'memory_fts'`

	// sqliteFTSObjectsQuery counts the FTS5 table and its three triggers:
	// 4 when ensureSQLite has nothing to create.
	sqliteFTSObjectsQuery = `SELECT count(*) FROM sqlite_master
	WHERE (type = 'table' AND name = 'memory_fts')
		OR (type = 'trigger' AND name IN ('memory_items_fts_insert', 'memory_items_fts_delete', 'memory_items_fts_update'))`

	createSQLiteFTSQuery = `CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
	scope_key, content, tags,
	content = 'memory_items', content_rowid = 'doc_id',
	tokenize = 'unicode61 remove_diacritics 2')`

	createSQLiteFTSInsertTrigger = `CREATE TRIGGER IF NOT EXISTS memory_items_fts_insert AFTER INSERT ON memory_items BEGIN
	INSERT INTO memory_fts (rowid, scope_key, content, tags) VALUES (new.doc_id, new.scope_key, new.content, new.tags);
END`

	createSQLiteFTSDeleteTrigger = `CREATE TRIGGER IF NOT EXISTS memory_items_fts_delete AFTER DELETE ON memory_items BEGIN
	INSERT INTO memory_fts (memory_fts, rowid, scope_key, content, tags) VALUES ('delete', old.doc_id, old.scope_key, old.content, old.tags);
END`

	createSQLiteFTSUpdateTrigger = `CREATE TRIGGER IF NOT EXISTS memory_items_fts_update AFTER UPDATE OF scope_key, content, tags ON memory_items BEGIN
	INSERT INTO memory_fts (memory_fts, rowid, scope_key, content, tags) VALUES ('delete', old.doc_id, old.scope_key, old.content, old.tags);
	INSERT INTO memory_fts (rowid, scope_key, content, tags) VALUES (new.doc_id, new.scope_key, new.content, new.tags);
END`

	rebuildSQLiteFTSQuery = `INSERT INTO memory_fts (memory_fts) VALUES ('rebuild')`

	// bm25 is lower for a better match; the scope column weighs nothing.
	searchSQLiteQuery = `SELECT m.id, bm25(memory_fts, 0.0, 1.0, 1.0) AS rank
	FROM memory_fts JOIN memory_items m ON m.doc_id = memory_fts.rowid
	WHERE memory_fts MATCH $1 AND m.agent_id = $2 AND m.user_id = $3 AND m.workspace_id = $4
	ORDER BY rank, m.created_at DESC, m.id DESC
	LIMIT $5`
)

func (b *Builtin) ensureSQLite(ctx context.Context) error {
	// Every start but the first finds the index in place: one read says
	// so, without a write transaction (and its fsync) on the way to ready.
	var n int
	if err := b.db.Read().QueryRowContext(ctx, sqliteFTSObjectsQuery).Scan(&n); err == nil && n == 4 {
		return nil
	}
	return b.db.Tx(ctx, func(q dbutil.Querier) error {
		var exists int
		if err := q.QueryRowContext(ctx, sqliteFTSExistsQuery).Scan(&exists); err != nil {
			return err
		}
		for _, stmt := range []string{createSQLiteFTSQuery, createSQLiteFTSInsertTrigger,
			createSQLiteFTSDeleteTrigger, createSQLiteFTSUpdateTrigger} {
			if _, err := q.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		if exists == 0 { // items stored before the index existed
			_, err := q.ExecContext(ctx, rebuildSQLiteFTSQuery)
			return err
		}
		return nil
	})
}

func (b *Builtin) rebuildSQLite(ctx context.Context) error {
	if err := b.ensureSQLite(ctx); err != nil {
		return err
	}
	return b.db.Tx(ctx, func(q dbutil.Querier) error {
		_, err := q.ExecContext(ctx, rebuildSQLiteFTSQuery)
		return err
	})
}

func (b *Builtin) searchSQLite(ctx context.Context, scope Scope, q query, limit int) ([]Hit, error) {
	rows, err := b.db.Read().QueryContext(ctx, searchSQLiteQuery, q.fts5(scope.key()), scope.Agent, scope.User, scope.Workspace, limit)
	if err != nil {
		return nil, err
	}
	return scanHits(rows, true)
}
