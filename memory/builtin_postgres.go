package memory

import (
	"context"
	"strconv"
	"strings"

	"github.com/parleyd/parley/dbutil"
)

// PostgreSQL: a GIN index on the 'simple' tsvector of content and tags. The
// search repeats the indexed expression exactly, so the planner can combine
// it with the scope index (memory_items_scope).
const (
	postgresDocument = `to_tsvector('simple'::regconfig, m.content || ' ' || m.tags)`

	postgresFTSExistsQuery = `SELECT to_regclass('memory_items_fts') IS NOT NULL`

	// Replicas starting together create the index one at a time.
	postgresFTSLockQuery = `SELECT pg_advisory_xact_lock(7021292373850171748)`

	createPostgresFTSQuery = `CREATE INDEX IF NOT EXISTS memory_items_fts ON memory_items
	USING gin (to_tsvector('simple'::regconfig, content || ' ' || tags))`

	rebuildPostgresFTSQuery = `REINDEX INDEX memory_items_fts`

	// searchPostgresQuery is completed with the tsquery, %[1]s below.
	searchPostgresQuery = `SELECT m.id, ts_rank(` + postgresDocument + `, %[1]s) AS rank
	FROM memory_items m
	WHERE m.agent_id = $1 AND m.user_id = $2 AND m.workspace_id = $3 AND ` + postgresDocument + ` @@ %[1]s
	ORDER BY rank DESC, m.created_at DESC, m.id DESC
	LIMIT $4`
)

func (b *Builtin) ensurePostgres(ctx context.Context) error {
	var exists bool
	if err := b.db.Read().QueryRowContext(ctx, postgresFTSExistsQuery).Scan(&exists); err != nil || exists {
		return err
	}
	return b.db.Tx(ctx, func(q dbutil.Querier) error {
		if _, err := q.ExecContext(ctx, postgresFTSLockQuery); err != nil {
			return err
		}
		_, err := q.ExecContext(ctx, createPostgresFTSQuery)
		return err
	})
}

func (b *Builtin) rebuildPostgres(ctx context.Context) error {
	if err := b.ensurePostgres(ctx); err != nil {
		return err
	}
	_, err := b.db.Write().ExecContext(ctx, rebuildPostgresFTSQuery)
	return err
}

func (b *Builtin) searchPostgres(ctx context.Context, scope Scope, q query, limit int) ([]Hit, error) {
	args := []any{scope.Agent, scope.User, scope.Workspace, limit}
	// Any word matches: each term and each raw chunk goes through
	// plainto_tsquery, which reads its text as plain words and never fails.
	parts := make([]string, 0, len(q.terms)+len(q.chunks))
	for _, w := range append(append([]string(nil), q.terms...), q.chunks...) {
		args = append(args, w)
		parts = append(parts, "plainto_tsquery('simple'::regconfig, $"+strconv.Itoa(len(args))+")")
	}
	tsquery := "(" + strings.Join(parts, " || ") + ")"
	rows, err := b.db.Read().QueryContext(ctx, strings.ReplaceAll(searchPostgresQuery, "%[1]s", tsquery), args...)
	if err != nil {
		return nil, err
	}
	return scanHits(rows, false)
}
