package memory

import (
	"context"
	"fmt"
)

// reindexBatch is how many items Reindex reads and sends at a time.
const reindexBatch = 200

// Reindex rebuilds the store's index from memory_items, the source of truth,
// and returns how many items the index now holds. It is what
// "parley memory reindex" runs, and the way to fill an index after
// switching to it.
//
// The built-in index is rebuilt in place. An external index is emptied
// first, so documents of deleted items do not survive, then refilled in
// batches; searches see a partial index until it finishes. Writes made
// meanwhile still reach it through the queue.
func (s *Store) Reindex(ctx context.Context) (int, error) {
	if b, ok := s.index.(inDatabase); ok {
		return b.rebuild(ctx)
	}
	if r, ok := s.index.(resetter); ok {
		if err := r.Reset(ctx); err != nil {
			return 0, fmt.Errorf("reindex memory: empty the %s index: %w", s.index.Name(), err)
		}
	}
	n := 0
	var after int64
	for {
		docs, last, err := s.page(ctx, after)
		if err != nil {
			return n, fmt.Errorf("reindex memory: read items after %d: %w", after, err)
		}
		if len(docs) == 0 {
			return n, nil
		}
		if err := s.upsertAll(ctx, docs); err != nil {
			return n, fmt.Errorf("reindex memory: %d of the items are indexed: %w", n, err)
		}
		n += len(docs)
		after = last
	}
}

func (s *Store) page(ctx context.Context, after int64) (docs []Doc, last int64, err error) {
	rows, err := s.db.Read().QueryContext(ctx, itemPageQuery, after, reindexBatch)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		it, err := scanItem(rows, &last)
		if err != nil {
			return nil, 0, err
		}
		docs = append(docs, it.doc())
	}
	return docs, last, rows.Err()
}

func (s *Store) upsertAll(ctx context.Context, docs []Doc) error {
	if b, ok := s.index.(batchUpserter); ok {
		return b.UpsertBatch(ctx, docs)
	}
	for _, d := range docs {
		if err := s.index.Upsert(ctx, d); err != nil {
			return err
		}
	}
	return nil
}
