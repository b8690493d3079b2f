package config

import (
	"fmt"
	"time"

	"github.com/parleyd/parley/config/section"
)

// Sessions configures how long sessions are kept.
type Sessions struct {
	// PruneArchivedAfter deletes an archived session, with its messages,
	// once it has been archived this long (checked hourly); 0, the
	// default, keeps archived sessions for ever. Active sessions are never
	// deleted.
	PruneArchivedAfter Duration `yaml:"prune_archived_after"`
	// KV bounds session storage (the kv_* tools).
	KV SessionKV `yaml:"kv"`
	// ClientTools configures the tools API clients declare.
	ClientTools ClientTools `yaml:"client_tools"`
	// Files bounds the session file store.
	Files SessionFiles `yaml:"files"`
	// SQL bounds each session's SQL database (sql_exec, sql_query).
	SQL SessionSQL `yaml:"sql"`
}

// Check reports the archive's age that can't be; the storage sections
// check themselves.
func (s Sessions) Check(r section.Reporter) {
	if d := s.PruneArchivedAfter; d < 0 || (d > 0 && d.Std() < time.Hour) {
		r.Add("prune_archived_after", fmt.Sprintf(`%s is out of range; use 0 to keep archived sessions, or an age of 1h or more, such as "720h" (30 days)`, d))
	}
}
