package memory

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
)

// Open builds long-term memory on db and the configured index. A
// Typesense server that is down at start is not fatal: writes wait in the
// durable queue and the collection is created once it answers.
func Open(ctx context.Context, db *dbutil.DB, c config.Memory, log *slog.Logger) (*Store, error) {
	var index Index
	switch c.Index {
	case "typesense":
		ts := c.Typesense
		t, err := NewTypesense(TypesenseOptions{URL: ts.URL, APIKey: ts.APIKey.Reveal(), Collection: ts.Collection, Timeout: ts.Timeout.Std()})
		if err != nil {
			return nil, fmt.Errorf("memory.typesense: %w", err)
		}
		if err := t.Ensure(ctx); err != nil {
			log.Warn("typesense is not answering; memory writes wait in the queue until it does", "error", err)
		}
		index = t
	default:
		b, err := NewBuiltin(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("memory index: %w", err)
		}
		index = b
	}
	return NewStore(db, index, WithLogger(log)), nil
}
