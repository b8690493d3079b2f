package memory

import (
	"context"
	"time"
)

// Index is a full-text index of memory items. Search returns only documents
// of the given scope, best match first and, among equal matches, newest
// first. Upsert and Delete are idempotent, so a retried write is harmless.
type Index interface {
	// Name says which index this is, for logs: "builtin" or "typesense".
	Name() string
	Upsert(ctx context.Context, doc Doc) error
	// Delete removes a document; deleting one that is not there succeeds.
	Delete(ctx context.Context, id ItemID) error
	// Search returns at most limit hits. A query with no words returns none.
	Search(ctx context.Context, scope Scope, text string, limit int) ([]Hit, error)
}

// searchQuery is what an index's Search looks for: text's words, in a
// valid scope. ok is false when there is nothing to look for (no words, or
// no room for a hit) or, with err, when the scope is invalid.
func searchQuery(scope Scope, text string, limit int) (q query, ok bool, err error) {
	if err := scope.Validate(); err != nil {
		return query{}, false, err
	}
	q = parseQuery(text)
	return q, !q.empty() && limit > 0, nil
}

// Doc is what an index stores of an item.
type Doc struct {
	ID        ItemID
	Kind      Kind
	Scope     Scope
	Content   string
	Tags      []string
	SessionID string
	CreatedAt time.Time
}

// Hit is one search match; a higher Score is a better match. Scores are
// comparable only within one search.
type Hit struct {
	ID    ItemID
	Score float64
}

// inDatabase marks an index that lives in the database and is kept up to
// date inside each item's own transaction (the built-in index): the Store
// queues nothing for it, and its Upsert and Delete have nothing left to do.
type inDatabase interface {
	Index
	// rebuild recreates the index from memory_items and reports how many
	// items it holds.
	rebuild(ctx context.Context) (int, error)
}

// resetter is an external index that Reindex empties before refilling, so
// documents of items deleted meanwhile do not survive a rebuild.
type resetter interface {
	Reset(ctx context.Context) error
}

// batchUpserter is an external index that takes many documents per request.
type batchUpserter interface {
	UpsertBatch(ctx context.Context, docs []Doc) error
}
