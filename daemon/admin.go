package daemon

import (
	"context"
	"fmt"

	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/turns"
)

// CompactSession summarizes a session's older messages now, as /compact
// does, and says what it did in a line for a person.
func (d *Daemon) CompactSession(ctx context.Context, id sessions.ID) (string, error) {
	s, err := d.sessions.Session(ctx, id)
	if err != nil {
		return "", err
	}
	a, ok := d.cfg().Agent(s.Key.AgentID)
	if !ok {
		return "", fmt.Errorf("session %s belongs to agent %q, which is not in the config any more", s.ID, s.Key.AgentID)
	}
	res, err := d.runner.Compact(ctx, s, turns.AgentConfig(a, s.Key))
	if err != nil && res.Skipped == "" {
		return "", fmt.Errorf("compact session %s: %w", s.ID, err)
	}
	return turns.CompactionLine(res), nil
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
