package files

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

const (
	// lockSessionQuery finds the session; on PostgreSQL it also locks its
	// row (lockSuffix), so two writes in one session count its usage one
	// after the other. SQLite's single writer already does.
	lockSessionQuery = `SELECT id FROM sessions WHERE id = $1`
	lockSuffix       = ` FOR UPDATE`

	sessionUsageExceptQuery = `SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM session_files
	WHERE session_id = $1 AND name <> $2`

	totalUsageQuery = `SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM session_files`

	usageQuery = `SELECT count(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM session_files WHERE session_id = $1`

	upsertFileQuery = `INSERT INTO session_files (session_id, name, media_type, size, data, created_at)
	VALUES ($1, $2, $3, $4, $5, $6)
	ON CONFLICT (session_id, name) DO UPDATE SET media_type = excluded.media_type, size = excluded.size,
	data = excluded.data, created_at = excluded.created_at`

	fileQuery = `SELECT media_type, size, data, created_at FROM session_files WHERE session_id = $1 AND name = $2`

	statFileQuery = `SELECT media_type, size, created_at FROM session_files WHERE session_id = $1 AND name = $2`

	listFilesQuery = `SELECT name, media_type, size, created_at FROM session_files WHERE session_id = $1 ORDER BY name`

	deleteFileQuery = `DELETE FROM session_files WHERE session_id = $1 AND name = $2`

	copyFilesQuery = `INSERT INTO session_files (session_id, name, media_type, size, data, created_at)
	SELECT $2, name, media_type, size, data, created_at FROM session_files WHERE session_id = $1
	ON CONFLICT (session_id, name) DO NOTHING`
)

// Store keeps session files in the database. It is safe for concurrent
// use.
type Store struct {
	db     *dbutil.DB
	limits atomic.Pointer[Limits]
	log    *slog.Logger
	now    func() time.Time
}

// NewStore returns the store on db with limits (zero fields: defaults).
func NewStore(db *dbutil.DB, limits Limits, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{db: db, log: log, now: time.Now}
	s.SetLimits(limits)
	return s
}

// Limits are the store's limits.
func (s *Store) Limits() Limits { return *s.limits.Load() }

// SetLimits changes the limits from the next write on.
func (s *Store) SetLimits(l Limits) {
	l = l.withDefaults()
	s.limits.Store(&l)
}

// CheckSize refuses a file of n bytes over the per-file limit before it
// is read whole.
func (s *Store) CheckSize(n int64) error {
	if lim := s.Limits(); n > lim.MaxFileBytes {
		return fmt.Errorf("%w: the file is %d bytes and the limit per file is %d bytes (sessions.files.max_file_bytes)", ErrFileTooLarge, n, lim.MaxFileBytes)
	}
	return nil
}

// Put stores data as the session's file name, replacing one of the same
// name. A file over a limit is refused with an error naming it, and
// nothing changes.
func (s *Store) Put(ctx context.Context, id sessions.ID, name, mediaType string, data []byte) (File, error) {
	if err := CheckName(name); err != nil {
		return File{}, err
	}
	size := int64(len(data))
	if err := s.CheckSize(size); err != nil {
		return File{}, err
	}
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	lim := s.Limits()
	now := s.now()
	lock := lockSessionQuery
	if s.db.Dialect == dbutil.Postgres {
		lock += lockSuffix
	}
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		var found string
		if err := q.QueryRowContext(ctx, lock, string(id)).Scan(&found); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrNoSession, id)
		} else if err != nil {
			return err
		}
		var used, total int64
		if err := q.QueryRowContext(ctx, sessionUsageExceptQuery, string(id), name).Scan(&used); err != nil {
			return err
		}
		if used+size > lim.MaxSessionBytes {
			return fmt.Errorf("%w: the session's files hold %d bytes, and %d more would pass its limit of %d bytes (sessions.files.max_session_bytes); delete a file first",
				ErrSessionFull, used, size, lim.MaxSessionBytes)
		}
		if err := q.QueryRowContext(ctx, totalUsageQuery).Scan(&total); err != nil {
			return err
		}
		if total+size > lim.MaxTotalBytes {
			return fmt.Errorf("%w: parley's file store holds %d bytes, and %d more would pass its limit of %d bytes (sessions.files.max_total_bytes); ask the operator",
				ErrStoreFull, total, size, lim.MaxTotalBytes)
		}
		_, err := q.ExecContext(ctx, upsertFileQuery, string(id), name, mediaType, size, data, dbutil.Millis(now))
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNoSession) || errors.Is(err, ErrSessionFull) || errors.Is(err, ErrStoreFull) {
			return File{}, err
		}
		return File{}, fmt.Errorf("store file %q of session %s: %w", name, id, err)
	}
	return File{Name: name, MediaType: mediaType, Size: size, CreatedAt: dbutil.Time(dbutil.Millis(now))}, nil
}

// Get returns the session's file name with its data, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id sessions.ID, name string) (File, error) {
	if err := CheckName(name); err != nil {
		return File{}, err
	}
	f := File{Name: name}
	var created int64
	err := s.db.Read().QueryRowContext(ctx, fileQuery, string(id), name).Scan(&f.MediaType, &f.Size, &f.Data, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return File{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return File{}, fmt.Errorf("read file %q of session %s: %w", name, id, err)
	}
	f.CreatedAt = dbutil.Time(created)
	return f, nil
}

// Read returns the data and media type of the session's file name, or
// ErrNotFound: Get in the form agent.Options.StoredFile takes.
func (s *Store) Read(ctx context.Context, id sessions.ID, name string) ([]byte, string, error) {
	f, err := s.Get(ctx, id, name)
	return f.Data, f.MediaType, err
}

// Stat returns the session's file name without its data, or ErrNotFound.
func (s *Store) Stat(ctx context.Context, id sessions.ID, name string) (File, error) {
	if err := CheckName(name); err != nil {
		return File{}, err
	}
	f := File{Name: name}
	var created int64
	err := s.db.Read().QueryRowContext(ctx, statFileQuery, string(id), name).Scan(&f.MediaType, &f.Size, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return File{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return File{}, fmt.Errorf("read file %q of session %s: %w", name, id, err)
	}
	f.CreatedAt = dbutil.Time(created)
	return f, nil
}

// List is the session's files, by name, without their data.
func (s *Store) List(ctx context.Context, id sessions.ID) ([]File, error) {
	rows, err := s.db.Read().QueryContext(ctx, listFilesQuery, string(id))
	if err != nil {
		return nil, fmt.Errorf("list files of session %s: %w", id, err)
	}
	defer rows.Close()
	out := []File{}
	for rows.Next() {
		var f File
		var created int64
		if err := rows.Scan(&f.Name, &f.MediaType, &f.Size, &created); err != nil {
			return nil, fmt.Errorf("list files of session %s: %w", id, err)
		}
		f.CreatedAt = dbutil.Time(created)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list files of session %s: %w", id, err)
	}
	return out, nil
}

// Delete removes the session's file name and reports whether it was there.
func (s *Store) Delete(ctx context.Context, id sessions.ID, name string) (bool, error) {
	if err := CheckName(name); err != nil {
		return false, err
	}
	res, err := s.db.Write().ExecContext(ctx, deleteFileQuery, string(id), name)
	if err != nil {
		return false, fmt.Errorf("delete file %q of session %s: %w", name, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete file %q of session %s: %w", name, id, err)
	}
	return n > 0, nil
}

// Copy gives session to copies of from's files (a branch sees what its
// parent had); files to already has keep theirs.
func (s *Store) Copy(ctx context.Context, from, to sessions.ID) error {
	return CopyIn(ctx, s.db.Write(), from, to)
}

// CopyIn is Copy in q, the caller's transaction: sessions.BranchOptions.Also
// copies a session's files to its branch as the branch is made. The copy
// is the branch's own (deleting it there leaves the parent's), and the
// limits don't refuse it: the parent's files were within them.
func CopyIn(ctx context.Context, q dbutil.Querier, from, to sessions.ID) error {
	if _, err := q.ExecContext(ctx, copyFilesQuery, string(from), string(to)); err != nil {
		return fmt.Errorf("copy files of session %s to %s: %w", from, to, err)
	}
	return nil
}

// Usage is what the session stores, against the limits.
func (s *Store) Usage(ctx context.Context, id sessions.ID) (Usage, error) {
	u := Usage{Limits: s.Limits()}
	if err := s.db.Read().QueryRowContext(ctx, usageQuery, string(id)).Scan(&u.Files, &u.Bytes); err != nil {
		return Usage{}, fmt.Errorf("usage of session %s's files: %w", id, err)
	}
	return u, nil
}
