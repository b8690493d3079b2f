package files

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
)

const (
	// usageForWriteQuery finds the session, with what its files hold but
	// the one named $2 (which a write replaces) and what every session's
	// files hold: all kept by triggers as files come and go (migrations
	// 00040 and 00042), so no file row is added up. On PostgreSQL it also
	// locks the session's row (lockSuffix), so two writes in one session
	// count its usage one after the other; SQLite's single writer already
	// does.
	// It also says whether the file it replaces is kept in chunks: only
	// then are there chunks to drop.
	usageForWriteQuery = `SELECT s.id,
	COALESCE(u.bytes, 0) - COALESCE((SELECT f.size FROM session_files f WHERE f.session_id = s.id AND f.name = $2), 0),
	(SELECT t.bytes FROM file_store_usage t WHERE t.id = 1),
	COALESCE((SELECT f.chunked FROM session_files f WHERE f.session_id = s.id AND f.name = $2), 0)
	FROM sessions s LEFT JOIN session_file_usage u ON u.session_id = s.id
	WHERE s.id = $1`
	lockSuffix = ` FOR UPDATE OF s`

	usageQuery = `SELECT files, bytes FROM session_file_usage WHERE session_id = $1`

	upsertFileQuery = `INSERT INTO session_files (session_id, name, media_type, size, data, created_at, chunked)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (session_id, name) DO UPDATE SET media_type = excluded.media_type, size = excluded.size,
	data = excluded.data, created_at = excluded.created_at, chunked = excluded.chunked`

	// A file written again drops the chunks it had (only one kept in
	// chunks has any).
	deleteChunksQuery = `DELETE FROM session_file_chunks WHERE session_id = $1 AND name = $2`
	insertChunkQuery  = `INSERT INTO session_file_chunks (session_id, name, seq, data) VALUES ($1, $2, $3, $4)`
	chunksQuery       = `SELECT data FROM session_file_chunks WHERE session_id = $1 AND name = $2 ORDER BY seq`

	fileQuery = `SELECT media_type, size, data, created_at, chunked FROM session_files WHERE session_id = $1 AND name = $2`

	statFileQuery = `SELECT media_type, size, created_at FROM session_files WHERE session_id = $1 AND name = $2`

	listFilesQuery = `SELECT name, media_type, size, created_at FROM session_files WHERE session_id = $1 ORDER BY name`

	deleteFileQuery = `DELETE FROM session_files WHERE session_id = $1 AND name = $2`

	copyFilesQuery = `INSERT INTO session_files (session_id, name, media_type, size, data, created_at, chunked)
	SELECT $2, name, media_type, size, data, created_at, chunked FROM session_files WHERE session_id = $1
	ON CONFLICT (session_id, name) DO NOTHING`
	// The chunks of the files just copied: a file to had of its own (kept)
	// gets none of its namesake's.
	copyChunksQuery = `INSERT INTO session_file_chunks (session_id, name, seq, data)
	SELECT $2, c.name, c.seq, c.data FROM session_file_chunks c
	JOIN session_files f ON f.session_id = c.session_id AND f.name = c.name
	JOIN session_files t ON t.session_id = $2 AND t.name = c.name AND t.chunked = 1 AND t.created_at = f.created_at AND t.size = f.size
	WHERE c.session_id = $1
	AND NOT EXISTS (SELECT 1 FROM session_file_chunks d WHERE d.session_id = $2 AND d.name = c.name)`
)

// ChunkSize is the size of the chunks a large file is kept in: storing or
// sending one holds about this much of it in memory at a time.
const ChunkSize = 1 << 20

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
	if data == nil {
		data = []byte{} // an empty file, not a NULL
	}
	return s.put(ctx, id, name, mediaType, data, nil, int64(len(data)))
}

// PutFrom is Put of the size bytes r gives (a spooled upload): a file over
// ChunkSize is read and stored a chunk at a time, never whole. r giving
// other than size bytes is an error, and nothing changes.
func (s *Store) PutFrom(ctx context.Context, id sessions.ID, name, mediaType string, r io.Reader, size int64) (File, error) {
	return s.put(ctx, id, name, mediaType, nil, r, size)
}

// put is Put of data when it is in memory, else PutFrom of r.
func (s *Store) put(ctx context.Context, id sessions.ID, name, mediaType string, data []byte, r io.Reader, size int64) (File, error) {
	if err := CheckName(name); err != nil {
		return File{}, err
	}
	if err := s.CheckSize(size); err != nil {
		return File{}, err
	}
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	lim := s.Limits()
	now := s.now()
	query := usageForWriteQuery
	if s.db.Dialect == dbutil.Postgres {
		query += lockSuffix
	}
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		var (
			found       string
			used, total int64
			chunked     int
		)
		if err := q.QueryRowContext(ctx, query, string(id), name).Scan(&found, &used, &total, &chunked); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrNoSession, id)
		} else if err != nil {
			return err
		}
		if used+size > lim.MaxSessionBytes {
			return fmt.Errorf("%w: the session's files hold %d bytes, and %d more would pass its limit of %d bytes (sessions.files.max_session_bytes); delete a file first",
				ErrSessionFull, used, size, lim.MaxSessionBytes)
		}
		if total+size > lim.MaxTotalBytes {
			return fmt.Errorf("%w: parley's file store holds %d bytes, and %d more would pass its limit of %d bytes (sessions.files.max_total_bytes); ask the operator",
				ErrStoreFull, total, size, lim.MaxTotalBytes)
		}
		return s.write(ctx, q, id, name, mediaType, data, r, size, now, chunked != 0)
	})
	if err != nil {
		if errors.Is(err, ErrNoSession) || errors.Is(err, ErrSessionFull) || errors.Is(err, ErrStoreFull) {
			return File{}, err
		}
		return File{}, fmt.Errorf("store file %q of session %s: %w", name, id, err)
	}
	return File{Name: name, MediaType: mediaType, Size: size, CreatedAt: dbutil.Time(dbutil.Millis(now))}, nil
}

// write stores the file's row and data in q's transaction: a small one
// whole, a large one in chunks, read from r a chunk at a time. data, when
// not nil, is the file in memory, stored as it is (r is not read).
// hadChunks says the file it replaces was kept in chunks, which go.
func (s *Store) write(ctx context.Context, q dbutil.Querier, id sessions.ID, name, mediaType string, data []byte, r io.Reader, size int64, now time.Time, hadChunks bool) error {
	if hadChunks {
		if _, err := q.ExecContext(ctx, deleteChunksQuery, string(id), name); err != nil {
			return err
		}
	}
	if data != nil {
		r = bytes.NewReader(data)
	}
	if size <= ChunkSize {
		if data == nil {
			data = make([]byte, size)
			if _, err := io.ReadFull(r, data); err != nil {
				return fmt.Errorf("read the file: %w", err)
			}
		}
		_, err := q.ExecContext(ctx, upsertFileQuery, string(id), name, mediaType, size, data, dbutil.Millis(now), 0)
		return err
	}
	if _, err := q.ExecContext(ctx, upsertFileQuery, string(id), name, mediaType, size, []byte{}, dbutil.Millis(now), 1); err != nil {
		return err
	}
	buf := make([]byte, ChunkSize)
	for seq, left := 0, size; left > 0; seq++ {
		n := min(left, ChunkSize)
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return fmt.Errorf("read the file: %w", err)
		}
		if _, err := q.ExecContext(ctx, insertChunkQuery, string(id), name, seq, buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

// Get returns the session's file name with its data, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id sessions.ID, name string) (File, error) {
	if err := CheckName(name); err != nil {
		return File{}, err
	}
	f, body, err := s.Open(ctx, id, name)
	if err != nil {
		return File{}, err
	}
	defer body.Close()
	f.Data = make([]byte, 0, f.Size)
	buf := bytes.NewBuffer(f.Data)
	if _, err := io.Copy(buf, body); err != nil {
		return File{}, fmt.Errorf("read file %q of session %s: %w", name, id, err)
	}
	f.Data = buf.Bytes()
	return f, nil
}

// Open returns the session's file name without its data, and its data to
// read: a large file a chunk at a time, so a download never holds it
// whole. The caller closes it.
func (s *Store) Open(ctx context.Context, id sessions.ID, name string) (File, io.ReadCloser, error) {
	if err := CheckName(name); err != nil {
		return File{}, nil, err
	}
	f := File{Name: name}
	var (
		created int64
		data    []byte
		chunked int
	)
	err := s.db.Read().QueryRowContext(ctx, fileQuery, string(id), name).Scan(&f.MediaType, &f.Size, &data, &created, &chunked)
	if errors.Is(err, sql.ErrNoRows) {
		return File{}, nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return File{}, nil, fmt.Errorf("read file %q of session %s: %w", name, id, err)
	}
	f.CreatedAt = dbutil.Time(created)
	if chunked == 0 {
		return f, io.NopCloser(bytes.NewReader(data)), nil
	}
	rows, err := s.db.Read().QueryContext(ctx, chunksQuery, string(id), name)
	if err != nil {
		return File{}, nil, fmt.Errorf("read file %q of session %s: %w", name, id, err)
	}
	return f, &chunkReader{rows: rows, left: f.Size}, nil
}

// chunkReader reads a chunked file's chunks in order. Each chunk is read
// in place (sql.RawBytes, valid until the next row), never copied.
type chunkReader struct {
	rows *sql.Rows
	cur  sql.RawBytes
	left int64 // bytes the file still holds past cur
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		if !c.rows.Next() {
			if err := c.rows.Err(); err != nil {
				return 0, err
			}
			if c.left > 0 {
				return 0, fmt.Errorf("the file ends %d bytes short: %w", c.left, io.ErrUnexpectedEOF)
			}
			return 0, io.EOF
		}
		if err := c.rows.Scan(&c.cur); err != nil {
			return 0, err
		}
		c.left -= int64(len(c.cur))
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

func (c *chunkReader) Close() error { return c.rows.Close() }

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
	if _, err := q.ExecContext(ctx, copyChunksQuery, string(from), string(to)); err != nil {
		return fmt.Errorf("copy files of session %s to %s: %w", from, to, err)
	}
	return nil
}

// Usage is what the session stores, against the limits.
func (s *Store) Usage(ctx context.Context, id sessions.ID) (Usage, error) {
	u := Usage{Limits: s.Limits()}
	err := s.db.Read().QueryRowContext(ctx, usageQuery, string(id)).Scan(&u.Files, &u.Bytes)
	if err != nil && !errors.Is(err, sql.ErrNoRows) { // no row: no file yet
		return Usage{}, fmt.Errorf("usage of session %s's files: %w", id, err)
	}
	return u, nil
}
