package config

import (
	"fmt"
	"strings"
	"time"
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
	DefaultSQLStatementTimeout = Duration(5 * time.Second)
)

// checkSQL fills in the SQL limits' defaults and reports bad ones.
func (s *Sessions) checkSQL(ck *checker) {
	q := &s.SQL
	if q.MaxBytes == 0 && !ck.set["sessions.sql.max_bytes"] {
		q.MaxBytes = DefaultSQLMaxBytes
	}
	if q.MaxRows == 0 && !ck.set["sessions.sql.max_rows"] {
		q.MaxRows = DefaultSQLMaxRows
	}
	if q.StatementTimeout == 0 && !ck.set["sessions.sql.statement_timeout"] {
		q.StatementTimeout = DefaultSQLStatementTimeout
	}
	if n := q.MaxBytes; n < 64<<10 || n > 1<<30 {
		ck.add("sessions.sql.max_bytes", fmt.Sprintf("%d is out of range; use %d (64 KiB) to %d (1 GiB)", n, 64<<10, 1<<30))
	}
	if n := q.MaxRows; n < 1 || n > 10000 {
		ck.add("sessions.sql.max_rows", fmt.Sprintf("%d is out of range; use 1-10000", n))
	}
	if d := q.StatementTimeout.Std(); d < 100*time.Millisecond || d > 5*time.Minute {
		ck.add("sessions.sql.statement_timeout", fmt.Sprintf(`%s is out of range; use 100ms to 5m, such as "5s"`, q.StatementTimeout))
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

// checkStorage reports session storage's and client tools' problems and
// fills in their defaults; an explicit 0 is a problem, not a default.
func (s *Sessions) checkStorage(ck *checker) {
	intDefault := func(v *int, key string, def int) {
		if *v == 0 && !ck.set[key] {
			*v = def
		}
	}
	kv := &s.KV
	intDefault(&kv.MaxValueBytes, "sessions.kv.max_value_bytes", DefaultKVMaxValueBytes)
	intDefault(&kv.MaxSessionBytes, "sessions.kv.max_session_bytes", DefaultKVMaxSessionBytes)
	intDefault(&kv.MaxKeys, "sessions.kv.max_keys", DefaultKVMaxKeys)
	if n := kv.MaxValueBytes; n < 1 || n > 16<<20 {
		ck.add("sessions.kv.max_value_bytes", fmt.Sprintf("%d is out of range; use 1 to %d (16 MiB)", n, 16<<20))
	}
	switch n := kv.MaxSessionBytes; {
	case n < 1 || n > 1<<30:
		ck.add("sessions.kv.max_session_bytes", fmt.Sprintf("%d is out of range; use 1 to %d (1 GiB)", n, 1<<30))
	case n < kv.MaxValueBytes:
		ck.add("sessions.kv.max_session_bytes", fmt.Sprintf("%d is below max_value_bytes (%d): one value could never be stored whole; raise it, or lower max_value_bytes", n, kv.MaxValueBytes))
	}
	if n := kv.MaxKeys; n < 1 || n > 100000 {
		ck.add("sessions.kv.max_keys", fmt.Sprintf("%d is out of range; use 1-100000", n))
	}
	s.checkFiles(ck)
	s.checkSQL(ck)
	if s.ClientTools.Timeout == 0 && !ck.set["sessions.client_tools.timeout"] {
		s.ClientTools.Timeout = Duration(DefaultClientToolTimeout)
	}
	if d := s.ClientTools.Timeout.Std(); d < time.Second || d > time.Hour {
		ck.add("sessions.client_tools.timeout", fmt.Sprintf(`%s is out of range; use a duration from 1s to 1h, such as "5m" (the session's other messages wait while a run waits)`, s.ClientTools.Timeout))
	}
}

// check trims the skills folders and reports blank ones.
func (s *Skills) check(ck *checker) {
	for i := range s.Dirs {
		s.Dirs[i] = strings.TrimSpace(s.Dirs[i])
		if s.Dirs[i] == "" {
			ck.add(fmt.Sprintf("skills.dirs[%d]", i), "is empty; give a folder of skills, such as /srv/parley/skills, or remove the entry")
		}
	}
	if len(s.Dirs) == 0 {
		s.Dirs = nil // "dirs: []" is the same as leaving it out
	}
}

// checkFiles fills the file store's defaults and reports its problems.
func (s *Sessions) checkFiles(ck *checker) {
	f := &s.Files
	for _, l := range []struct {
		v   *int64
		key string
		def int64
	}{
		{&f.MaxFileBytes, "sessions.files.max_file_bytes", DefaultFilesMaxFileBytes},
		{&f.MaxSessionBytes, "sessions.files.max_session_bytes", DefaultFilesMaxSessionBytes},
		{&f.MaxTotalBytes, "sessions.files.max_total_bytes", DefaultFilesMaxTotalBytes},
	} {
		if *l.v == 0 && !ck.set[l.key] {
			*l.v = l.def
		}
		if *l.v < 1 || *l.v > 1<<40 {
			ck.add(l.key, fmt.Sprintf("%d is out of range; use 1 to %d (1 TiB)", *l.v, int64(1)<<40))
		}
	}
	if f.MaxSessionBytes < f.MaxFileBytes {
		ck.add("sessions.files.max_session_bytes", fmt.Sprintf("%d is below max_file_bytes (%d): one file could never be stored whole; raise it, or lower max_file_bytes", f.MaxSessionBytes, f.MaxFileBytes))
	}
	if f.MaxTotalBytes < f.MaxSessionBytes {
		ck.add("sessions.files.max_total_bytes", fmt.Sprintf("%d is below max_session_bytes (%d); raise it, or lower max_session_bytes", f.MaxTotalBytes, f.MaxSessionBytes))
	}
}
