package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
)

// Defaults of session storage and client tools.
const (
	DefaultKVMaxValueBytes   = 64 << 10
	DefaultKVMaxSessionBytes = 1 << 20
	DefaultKVMaxKeys         = 1000
	DefaultClientToolTimeout = 5 * time.Minute

	DefaultFilesMaxFileBytes    = 20 << 20
	DefaultFilesMaxSessionBytes = 100 << 20
	DefaultFilesMaxTotalBytes   = 2 << 30
)

// SessionKV bounds session storage: what an agent keeps with kv_set.
type SessionKV struct {
	// MaxValueBytes caps one value. Default 64 KiB.
	MaxValueBytes int `yaml:"max_value_bytes"`
	// MaxSessionBytes caps one session's keys and values together.
	// Default 1 MiB.
	MaxSessionBytes int `yaml:"max_session_bytes"`
	// MaxKeys caps one session's keys. Default 1000.
	MaxKeys int `yaml:"max_keys"`
}

// SessionFiles bounds the session file store: the files messages bring
// and agents write.
type SessionFiles struct {
	// MaxFileBytes caps one file. Default 20 MiB.
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxSessionBytes caps one session's files together. Default 100 MiB.
	MaxSessionBytes int64 `yaml:"max_session_bytes"`
	// MaxTotalBytes caps every session's files together. Default 2 GiB.
	MaxTotalBytes int64 `yaml:"max_total_bytes"`
}

// SessionSQL bounds each session's own SQL database.
type SessionSQL struct {
	// MaxBytes caps one session's database. Default 10 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxRows caps the rows sql_query shows. Default 100.
	MaxRows int `yaml:"max_rows"`
	// StatementTimeout bounds one sql_exec or sql_query call. Default 5s.
	StatementTimeout Duration `yaml:"statement_timeout"`
}

// The session SQL limits when the config sets none.
const (
	DefaultSQLMaxBytes         = 10 << 20
	DefaultSQLMaxRows          = 100
	DefaultSQLStatementTimeout = 5 * time.Second
)

// SetDefaults fills in the SQL limits the file leaves out; an explicit
// 0 is a problem, not a default.
func (q *SessionSQL) SetDefaults(set section.Set) {
	section.Default(&q.MaxBytes, set, "max_bytes", DefaultSQLMaxBytes)
	section.Default(&q.MaxRows, set, "max_rows", DefaultSQLMaxRows)
	section.Default(&q.StatementTimeout, set, "statement_timeout", Duration(DefaultSQLStatementTimeout))
}

// Check reports the SQL limits' problems.
func (q SessionSQL) Check(r section.Reporter) {
	if n := q.MaxBytes; n < 64<<10 || n > 1<<30 {
		r.Add("max_bytes", fmt.Sprintf("%d is out of range; use %d (64 KiB) to %d (1 GiB)", n, 64<<10, 1<<30))
	}
	if n := q.MaxRows; n < 1 || n > 10000 {
		r.Add("max_rows", fmt.Sprintf("%d is out of range; use 1-10000", n))
	}
	if d := q.StatementTimeout.Std(); d < 100*time.Millisecond || d > 5*time.Minute {
		r.Add("statement_timeout", fmt.Sprintf(`%s is out of range; use 100ms to 5m, such as "5s"`, q.StatementTimeout))
	}
}

// ClientTools configures the tools API clients declare.
type ClientTools struct {
	// Timeout is how long a run waits for a client's tool result before
	// the turn ends with an error result. Default 5m.
	Timeout Duration `yaml:"timeout"`
}

// Skills configures where agents find skills besides their workspace's
// skills folder.
type Skills struct {
	// Dirs are folders of skills (each skill a sub-folder with a
	// SKILL.md) every agent has. An agent's own <workspace>/skills comes
	// first: a skill there hides one of the same name here.
	Dirs []string `yaml:"dirs"`
}

// SetDefaults fills in the kv limits the file leaves out; an explicit 0
// is a problem, not a default.
func (kv *SessionKV) SetDefaults(set section.Set) {
	section.Default(&kv.MaxValueBytes, set, "max_value_bytes", DefaultKVMaxValueBytes)
	section.Default(&kv.MaxSessionBytes, set, "max_session_bytes", DefaultKVMaxSessionBytes)
	section.Default(&kv.MaxKeys, set, "max_keys", DefaultKVMaxKeys)
}

// Check reports the kv limits' problems.
func (kv SessionKV) Check(r section.Reporter) {
	if n := kv.MaxValueBytes; n < 1 || n > 16<<20 {
		r.Add("max_value_bytes", fmt.Sprintf("%d is out of range; use 1 to %d (16 MiB)", n, 16<<20))
	}
	switch n := kv.MaxSessionBytes; {
	case n < 1 || n > 1<<30:
		r.Add("max_session_bytes", fmt.Sprintf("%d is out of range; use 1 to %d (1 GiB)", n, 1<<30))
	case n < kv.MaxValueBytes:
		r.Add("max_session_bytes", fmt.Sprintf("%d is below max_value_bytes (%d): one value could never be stored whole; raise it, or lower max_value_bytes", n, kv.MaxValueBytes))
	}
	if n := kv.MaxKeys; n < 1 || n > 100000 {
		r.Add("max_keys", fmt.Sprintf("%d is out of range; use 1-100000", n))
	}
}

// SetDefaults fills in the client tools' timeout when the file leaves it
// out.
func (ct *ClientTools) SetDefaults(set section.Set) {
	section.Default(&ct.Timeout, set, "timeout", Duration(DefaultClientToolTimeout))
}

// Check reports a client tools' timeout out of range.
func (ct ClientTools) Check(r section.Reporter) {
	if d := ct.Timeout.Std(); d < time.Second || d > time.Hour {
		r.Add("timeout", fmt.Sprintf(`%s is out of range; use a duration from 1s to 1h, such as "5m" (the session's other messages wait while a run waits)`, ct.Timeout))
	}
}

// SetDefaults trims the skills folders.
func (s *Skills) SetDefaults(section.Set) {
	for i := range s.Dirs {
		s.Dirs[i] = strings.TrimSpace(s.Dirs[i])
	}
	if len(s.Dirs) == 0 {
		s.Dirs = nil // "dirs: []" is the same as leaving it out
	}
}

// Check reports blank skills folders.
func (s Skills) Check(r section.Reporter) {
	for i, d := range s.Dirs {
		if d == "" {
			r.Add(fmt.Sprintf("dirs[%d]", i), "is empty; give a folder of skills, such as /srv/parley/skills, or remove the entry")
		}
	}
}

// limits are the file store's limits, by key.
func (f *SessionFiles) limits() []struct {
	v   *int64
	key string
	def int64
} {
	return []struct {
		v   *int64
		key string
		def int64
	}{
		{&f.MaxFileBytes, "max_file_bytes", DefaultFilesMaxFileBytes},
		{&f.MaxSessionBytes, "max_session_bytes", DefaultFilesMaxSessionBytes},
		{&f.MaxTotalBytes, "max_total_bytes", DefaultFilesMaxTotalBytes},
	}
}

// SetDefaults fills in the file store's limits the file leaves out.
func (f *SessionFiles) SetDefaults(set section.Set) {
	for _, l := range f.limits() {
		section.Default(l.v, set, l.key, l.def)
	}
}

// Check reports the file store's limits' problems.
func (f SessionFiles) Check(r section.Reporter) {
	for _, l := range f.limits() {
		if *l.v < 1 || *l.v > 1<<40 {
			r.Add(l.key, fmt.Sprintf("%d is out of range; use 1 to %d (1 TiB)", *l.v, int64(1)<<40))
		}
	}
	if f.MaxSessionBytes < f.MaxFileBytes {
		r.Add("max_session_bytes", fmt.Sprintf("%d is below max_file_bytes (%d): one file could never be stored whole; raise it, or lower max_file_bytes", f.MaxSessionBytes, f.MaxFileBytes))
	}
	if f.MaxTotalBytes < f.MaxSessionBytes {
		r.Add("max_total_bytes", fmt.Sprintf("%d is below max_session_bytes (%d); raise it, or lower max_session_bytes", f.MaxTotalBytes, f.MaxSessionBytes))
	}
}
