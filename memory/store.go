// Package memory keeps agents' long-term memory: items an agent saved with
// memory_write and the summaries compaction wrote, each bound to a Scope
// (agent, user or group, workspace), and an Index to search them.
//
// The database is the source of truth. The built-in index lives in the same
// database and is updated inside each item's own transaction, so an item is
// searchable the moment its write commits. An external index (Typesense) is
// fed through memory_index_queue, a row written in that same transaction,
// which an Indexer pushes with backoff: an item written while the index is
// down is indexed once it is back, and Reindex rebuilds any index from the
// database.
package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

const itemColumns = `id, kind, agent_id, user_id, workspace_id, content, tags,
	source_session_id, source_message_id, created_at, updated_at`

const (
	insertMemoryQuery = `INSERT INTO memory_items
	(id, kind, agent_id, user_id, workspace_id, scope_key, content, tags, source_session_id, source_message_id, created_at, updated_at)
	VALUES ($1, 'memory', $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`

	// A summary is stored once per summary message. A conflicting row of
	// another scope is left alone, and RETURNING then yields no row.
	upsertSummaryQuery = `INSERT INTO memory_items
	(id, kind, agent_id, user_id, workspace_id, scope_key, content, tags, source_session_id, source_message_id, created_at, updated_at)
	VALUES ($1, 'summary', $2, $3, $4, $5, $6, '[]', $7, $8, $9, $9)
	ON CONFLICT (source_message_id) WHERE kind = 'summary'
	DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at
	WHERE memory_items.scope_key = excluded.scope_key AND memory_items.agent_id = excluded.agent_id
	AND memory_items.user_id = excluded.user_id AND memory_items.workspace_id = excluded.workspace_id
	RETURNING ` + itemColumns

	itemQuery = `SELECT ` + itemColumns + ` FROM memory_items
	WHERE id = $1 AND agent_id = $2 AND user_id = $3 AND workspace_id = $4`

	// itemAnyScopeQuery is for the indexer, which serves every scope.
	itemAnyScopeQuery = `SELECT ` + itemColumns + ` FROM memory_items WHERE id = $1`

	deleteItemQuery = `DELETE FROM memory_items
	WHERE id = $1 AND agent_id = $2 AND user_id = $3 AND workspace_id = $4`

	// itemsInScopeQuery is completed with one placeholder per id.
	itemsInScopeQuery = `SELECT ` + itemColumns + ` FROM memory_items
	WHERE agent_id = $1 AND user_id = $2 AND workspace_id = $3 AND id IN (`

	itemPageQuery = `SELECT doc_id, ` + itemColumns + ` FROM memory_items
	WHERE doc_id > $1 ORDER BY doc_id LIMIT $2`

	countItemsQuery = `SELECT count(*) FROM memory_items`

	enqueueQuery = `INSERT INTO memory_index_queue (item_id, op, generation, attempts, next_attempt_at, last_error, created_at)
	VALUES ($1, $2, 1, 0, $3, '', $3)
	ON CONFLICT (item_id) DO UPDATE SET op = excluded.op, generation = memory_index_queue.generation + 1,
	attempts = 0, next_attempt_at = excluded.next_attempt_at, last_error = ''`
)

// Store keeps memory items and searches them through its Index.
type Store struct {
	db    *dbutil.DB
	index Index
	log   *slog.Logger
	now   func() time.Time
	// kick wakes the Indexer when a write queued work for it.
	kick chan struct{}
}

// Option configures a Store.
type Option func(*Store)

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithLogger sets the logger.
func WithLogger(log *slog.Logger) Option { return func(s *Store) { s.log = log } }

// NewStore returns a Store on a migrated database that searches through
// index: the built-in one (NewBuiltin) or Typesense (NewTypesense). With an
// external index, run an Indexer (NewIndexer) beside it.
func NewStore(db *dbutil.DB, index Index, opts ...Option) *Store {
	s := &Store{db: db, index: index, now: time.Now, log: slog.New(slog.DiscardHandler), kick: make(chan struct{}, 1)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Index is the store's search index.
func (s *Store) Index() Index { return s.index }

// queued reports whether writes go through memory_index_queue.
func (s *Store) queued() bool {
	_, ok := s.index.(inDatabase)
	return !ok
}

// Wake tells the Indexer that a transaction which called SummaryTx has
// committed, so an external index gets the summary now.
func (s *Store) Wake() { s.afterWrite() }

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Write stores a memory in scope and returns it.
func (s *Store) Write(ctx context.Context, scope Scope, m Memory) (Item, error) {
	if err := scope.Validate(); err != nil {
		return Item{}, err
	}
	content, err := cleanContent(m.Content, MaxContentRunes)
	if err != nil {
		return Item{}, err
	}
	tags, err := cleanTags(m.Tags)
	if err != nil {
		return Item{}, err
	}
	id, err := newID()
	if err != nil {
		return Item{}, err
	}
	now := dbutil.Time(dbutil.Millis(s.now()))
	it := Item{ID: id, Kind: KindMemory, Scope: scope, Content: content, Tags: tags,
		SessionID: m.SessionID, MessageID: m.MessageID, CreatedAt: now, UpdatedAt: now}
	tagsJSON, _ := json.Marshal(tags) // a []string always encodes
	err = s.db.Tx(ctx, func(q dbutil.Querier) error {
		if _, err := q.ExecContext(ctx, insertMemoryQuery, it.ID, scope.Agent, scope.User, scope.Workspace, scope.key(),
			content, string(tagsJSON), string(m.SessionID), string(m.MessageID), dbutil.Millis(now)); err != nil {
			return err
		}
		return s.enqueue(ctx, q, it.ID, opUpsert, now)
	})
	if err != nil {
		return Item{}, fmt.Errorf("store memory in %s: %w", scope, err)
	}
	s.afterWrite()
	return it, nil
}

// IndexSummary stores a compaction summary as a searchable item of kind
// "summary" in scope (ScopeOf the compacted session's key). It is
// idempotent: indexing the same summary message again updates its content.
func (s *Store) IndexSummary(ctx context.Context, scope Scope, sum Summary) (Item, error) {
	var it Item
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		var err error
		it, err = s.SummaryTx(ctx, q, scope, sum)
		return err
	})
	if err != nil {
		return Item{}, err
	}
	s.afterWrite()
	return it, nil
}

// SummaryTx is IndexSummary inside the caller's transaction, so compaction
// can store the summary item in the same commit as the summary message and
// nothing is lost if the process stops between the two. Call Wake after the
// commit, or the Indexer finds the queued work on its next poll.
func (s *Store) SummaryTx(ctx context.Context, q dbutil.Querier, scope Scope, sum Summary) (Item, error) {
	if err := scope.Validate(); err != nil {
		return Item{}, err
	}
	if sum.MessageID == "" {
		return Item{}, fmt.Errorf("%w: a summary needs the id of its summary message", ErrInvalid)
	}
	content, err := cleanContent(sum.Content, MaxSummaryRunes)
	if err != nil {
		return Item{}, err
	}
	id, err := newID()
	if err != nil {
		return Item{}, err
	}
	now := dbutil.Millis(s.now())
	it, err := scanItem(q.QueryRowContext(ctx, upsertSummaryQuery, id, scope.Agent, scope.User, scope.Workspace, scope.key(),
		content, string(sum.SessionID), string(sum.MessageID), now))
	if errors.Is(err, sql.ErrNoRows) {
		return Item{}, fmt.Errorf("%w: summary message %s is already indexed in another scope", ErrInvalid, sum.MessageID)
	}
	if err != nil {
		return Item{}, fmt.Errorf("store summary of session %s: %w", sum.SessionID, err)
	}
	if err := s.enqueue(ctx, q, it.ID, opUpsert, dbutil.Time(now)); err != nil {
		return Item{}, fmt.Errorf("store summary of session %s: %w", sum.SessionID, err)
	}
	return it, nil
}

// Item returns one item of scope by id, or ErrNotFound.
func (s *Store) Item(ctx context.Context, scope Scope, id ItemID) (Item, error) {
	if err := scope.Validate(); err != nil {
		return Item{}, err
	}
	it, err := scanItem(s.db.Read().QueryRowContext(ctx, itemQuery, id, scope.Agent, scope.User, scope.Workspace))
	if errors.Is(err, sql.ErrNoRows) {
		return Item{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Item{}, fmt.Errorf("load memory %s: %w", id, err)
	}
	return it, nil
}

// Delete removes one item of scope, or returns ErrNotFound.
func (s *Store) Delete(ctx context.Context, scope Scope, id ItemID) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		res, err := q.ExecContext(ctx, deleteItemQuery, id, scope.Agent, scope.User, scope.Workspace)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return s.enqueue(ctx, q, id, opDelete, s.now())
	})
	if err != nil {
		return fmt.Errorf("delete memory %s: %w", id, err)
	}
	s.afterWrite()
	return nil
}

// Search returns the items of scope that best match text: best first, and
// newest first among equal matches. limit is clamped to 1..MaxSearchLimit
// (DefaultSearchLimit when 0 or less). Text is plain words; any query
// syntax in it is ignored, never an error.
func (s *Store) Search(ctx context.Context, scope Scope, text string, limit int) ([]Result, error) {
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	limit = min(limit, MaxSearchLimit)
	hits, err := s.index.Search(ctx, scope, text, limit)
	if err != nil {
		return nil, fmt.Errorf("search memories of %s: %w", scope, err)
	}
	if len(hits) == 0 {
		return nil, nil
	}
	// Load the hits from the database, again bound to scope: an index never
	// decides alone what a scope may see, and a hit whose item was deleted
	// while the index lagged drops out here.
	ids := make([]ItemID, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	items, err := s.itemsInScope(ctx, scope, ids)
	if err != nil {
		return nil, fmt.Errorf("search memories of %s: %w", scope, err)
	}
	out := make([]Result, 0, len(hits))
	for _, h := range hits {
		if it, ok := items[h.ID]; ok {
			out = append(out, Result{Item: it, Score: h.Score})
		}
	}
	return out, nil
}

func (s *Store) itemsInScope(ctx context.Context, scope Scope, ids []ItemID) (map[ItemID]Item, error) {
	var b strings.Builder
	b.WriteString(itemsInScopeQuery)
	args := []any{scope.Agent, scope.User, scope.Workspace}
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		args = append(args, string(id))
		b.WriteString("$" + strconv.Itoa(len(args)))
	}
	b.WriteString(")")
	rows, err := s.db.Read().QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[ItemID]Item, len(ids))
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, err
		}
		out[it.ID] = it
	}
	return out, rows.Err()
}

func (s *Store) enqueue(ctx context.Context, q dbutil.Querier, id ItemID, op string, at time.Time) error {
	if !s.queued() {
		return nil
	}
	_, err := q.ExecContext(ctx, enqueueQuery, string(id), op, dbutil.Millis(at))
	return err
}

func (s *Store) afterWrite() {
	if s.queued() {
		s.wake()
	}
}

func scanItem(r dbutil.Scanner, extra ...any) (Item, error) {
	var (
		it                 Item
		kind, tags         string
		session, message   string
		created, updated   int64
		agent, user, space string
	)
	dest := append(extra, &it.ID, &kind, &agent, &user, &space, &it.Content, &tags, &session, &message, &created, &updated)
	if err := r.Scan(dest...); err != nil {
		return Item{}, err
	}
	it.Kind, it.Scope = Kind(kind), Scope{Agent: agent, User: user, Workspace: space}
	it.SessionID, it.MessageID = sessions.ID(session), sessions.MessageID(message)
	it.CreatedAt, it.UpdatedAt = dbutil.Time(created), dbutil.Time(updated)
	if err := json.Unmarshal([]byte(tags), &it.Tags); err != nil {
		return Item{}, fmt.Errorf("memory %s has unreadable tags: %w", it.ID, err)
	}
	if len(it.Tags) == 0 {
		it.Tags = nil
	}
	return it, nil
}

func newID() (ItemID, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return ItemID(u.String()), nil
}
