package daemon

import (
	"context"
	"fmt"

	"github.com/parleyd/parley/sessions"
)

// CompactSession summarizes a session's older messages now, as /compact
// does, and says what it did in a line for a person.
func (d *Daemon) CompactSession(ctx context.Context, id sessions.ID) (string, error) {
	return d.bridge.CompactSession(ctx, id)
}

// ReindexMemory rebuilds the memory search index from the database and
// returns how many items it indexed, and the index's name.
func (d *Daemon) ReindexMemory(ctx context.Context) (int, string, error) {
	n, err := d.memory.Reindex(ctx)
	if err != nil {
		return n, "", fmt.Errorf("reindex memory: %w", err)
	}
	return n, d.memory.Index().Name(), nil
}
