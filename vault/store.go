package vault

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/internal/lazyregexp"
)

const (
	upsertSecretQuery = `INSERT INTO secrets (name, value, key_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
	ON CONFLICT (name) DO UPDATE SET value = excluded.value, key_id = excluded.key_id, updated_at = excluded.updated_at
	RETURNING created_at`
	secretQuery       = `SELECT value, key_id FROM secrets WHERE name = $1`
	listSecretsQuery  = `SELECT name, created_at, updated_at FROM secrets ORDER BY name`
	deleteSecretQuery = `DELETE FROM secrets WHERE name = $1`

	upsertConnectionQuery = `INSERT INTO user_connections (surface, user_id, provider, value, key_id, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $6)
	ON CONFLICT (surface, user_id, provider) DO UPDATE SET value = excluded.value, key_id = excluded.key_id, updated_at = excluded.updated_at`
	connectionQuery      = `SELECT value, key_id FROM user_connections WHERE surface = $1 AND user_id = $2 AND provider = $3`
	userConnectionsQuery = `SELECT surface, user_id, provider, created_at, updated_at FROM user_connections
	WHERE surface = $1 AND user_id = $2 ORDER BY provider`
	allConnectionsQuery = `SELECT surface, user_id, provider, created_at, updated_at FROM user_connections
	ORDER BY surface, user_id, provider`
	deleteConnectionQuery = `DELETE FROM user_connections WHERE surface = $1 AND user_id = $2 AND provider = $3`

	upsertBlobQuery = `INSERT INTO sealed_blobs (kind, id, value, key_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)
	ON CONFLICT (kind, id) DO UPDATE SET value = excluded.value, key_id = excluded.key_id, updated_at = excluded.updated_at`
	blobQuery       = `SELECT value, key_id FROM sealed_blobs WHERE kind = $1 AND id = $2`
	blobIDsQuery    = `SELECT id FROM sealed_blobs WHERE kind = $1 ORDER BY id`
	deleteBlobQuery = `DELETE FROM sealed_blobs WHERE kind = $1 AND id = $2`
)

// Store keeps sealed values in parley's database. Without a key it still
// lists and deletes them (names and dates are not secret); setting and
// reading fail with ErrNoKey. It is safe for concurrent use.
type Store struct {
	db  *dbutil.DB
	key *Key
	now func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// Open is the secrets store on db, sealing with the key from
// PARLEY_SECRET_KEY or keyFile; with neither, its key is nil (names and
// dates can be listed; nothing can be sealed or opened).
func Open(db *dbutil.DB, keyFile string) (*Store, error) {
	key, _, err := LoadKey(keyFile, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	return NewStore(db, key), nil
}

// NewStore returns the store on db, sealing with key (nil: none set).
func NewStore(db *dbutil.DB, key *Key, opts ...Option) *Store {
	s := &Store{db: db, key: key, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Key is the key the store seals with; nil when none is set.
func (s *Store) Key() *Key { return s.key }

// Entry is a stored value's name and dates: what may be shown of it.
type Entry struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

var secretName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// CheckName says whether name can name a secret: 1 to 64 letters, digits,
// '_', '.' or '-', starting with a letter or digit.
func CheckName(name string) error {
	if !secretName.MatchString(name) {
		return fmt.Errorf("%w: %q is not a secret name; use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit, such as github_token", ErrInvalidName, name)
	}
	return nil
}

// Set seals value under name, replacing what was there, and reports
// whether the name is new.
func (s *Store) Set(ctx context.Context, name, value string) (created bool, err error) {
	if err := CheckName(name); err != nil {
		return false, err
	}
	if s.key == nil {
		return false, ErrNoKey
	}
	now := dbutil.Millis(s.now())
	var createdAt int64
	err = s.db.Write().QueryRowContext(ctx, upsertSecretQuery, name, s.key.Seal([]byte(value), secretAAD(name)), s.key.id, now).Scan(&createdAt)
	if err != nil {
		return false, fmt.Errorf("store secret %s: %w", name, err)
	}
	return createdAt == now, nil
}

// Secret opens the secret called name: ErrNotFound when there is none,
// ErrNoKey or ErrWrongKey when it can't be opened.
func (s *Store) Secret(ctx context.Context, name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	var sealed []byte
	var keyID string
	err := s.db.Read().QueryRowContext(ctx, secretQuery, name).Scan(&sealed, &keyID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("secret %s: %w; add it with: parley secrets set %s", name, ErrNotFound, name)
	}
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", name, err)
	}
	plain, err := s.open(sealed, keyID, secretAAD(name))
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	return string(plain), nil
}

// List names every secret, with its dates, in name order; it needs no key.
func (s *Store) List(ctx context.Context) ([]Entry, error) {
	out, err := dbutil.Query(ctx, s.db.Read(), listSecretsQuery, func(r dbutil.Scanner) (Entry, error) {
		var e Entry
		var c, u int64
		err := r.Scan(&e.Name, &c, &u)
		e.CreatedAt, e.UpdatedAt = dbutil.Time(c), dbutil.Time(u)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// Delete removes the secret called name and reports whether it was there.
func (s *Store) Delete(ctx context.Context, name string) (bool, error) {
	if err := CheckName(name); err != nil {
		return false, err
	}
	return s.exec(ctx, "delete secret "+name, deleteSecretQuery, name)
}

func (s *Store) exec(ctx context.Context, what, query string, args ...any) (bool, error) {
	res, err := s.db.Write().ExecContext(ctx, query, args...)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return n > 0, nil
}

// open checks the row's key id, then opens the value.
func (s *Store) open(sealed []byte, keyID string, aad []byte) ([]byte, error) {
	if s.key == nil {
		return nil, ErrNoKey
	}
	if keyID != s.key.id {
		return nil, ErrWrongKey
	}
	return s.key.Open(sealed, aad)
}

func secretAAD(name string) []byte { return []byte("secret\x00" + name) }

// User is a person on a surface, as a connection belongs to them.
type User struct {
	Surface string `json:"surface"`
	ID      string `json:"user_id"`
}

// String is "<surface>:<user id>", as permissions name a person.
func (u User) String() string { return u.Surface + ":" + u.ID }

// ParseUser reads "<surface>:<user id>".
func ParseUser(s string) (User, error) {
	surface, id, ok := strings.Cut(s, ":")
	u := User{Surface: surface, ID: id}
	if !ok {
		return User{}, fmt.Errorf("%w: %q is not a user; write <surface>:<user id>, such as telegram:12345", ErrInvalidName, s)
	}
	return u, u.check()
}

func (u User) check() error {
	if u.Surface == "" || u.ID == "" || strings.Contains(u.Surface, ":") || len(u.Surface) > 64 || len(u.ID) > 256 ||
		!printable(u.Surface) || !printable(u.ID) {
		return fmt.Errorf("%w: %q is not a user; give a surface (such as telegram) and the user's id there", ErrInvalidName, u.String())
	}
	return nil
}

// printable says whether s is valid UTF-8 with no control characters
// (a NUL, which PostgreSQL refuses in text, among them).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

var providerName = lazyregexp.New(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// LooksLikeProvider says whether name could be a provider's name (up to 32
// lower-case letters, digits, '-' or '_'), as a token is not.
func LooksLikeProvider(name string) bool { return providerName.MatchString(name) }

// CheckProvider says whether name can name a provider of user tokens:
// up to 32 lower-case letters, digits, '-' or '_'.
func CheckProvider(name string) error {
	if !providerName.MatchString(name) {
		return fmt.Errorf("%w: %q is not a provider name; use up to 32 lower-case letters, digits, '-' or '_', such as github", ErrInvalidName, name)
	}
	return nil
}

// Connection is a user's connection to a provider, without its token.
type Connection struct {
	User      User      `json:"user"`
	Provider  string    `json:"provider"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Connect seals the user's token for provider, replacing any earlier one.
func (s *Store) Connect(ctx context.Context, u User, provider, token string) error {
	return s.ConnectIn(ctx, s.db.Write(), u, provider, token)
}

// ConnectIn is Connect in the caller's transaction q.
func (s *Store) ConnectIn(ctx context.Context, q dbutil.Querier, u User, provider, token string) error {
	if err := u.check(); err != nil {
		return err
	}
	if err := CheckProvider(provider); err != nil {
		return err
	}
	if s.key == nil {
		return ErrNoKey
	}
	sealed := s.key.Seal([]byte(token), connectionAAD(u, provider))
	if _, err := q.ExecContext(ctx, upsertConnectionQuery, u.Surface, u.ID, provider, sealed, s.key.id, dbutil.Millis(s.now())); err != nil {
		return fmt.Errorf("store %s's %s connection: %w", u, provider, err)
	}
	return nil
}

// Token opens the user's token for provider: ErrNotFound when they have
// not connected it.
func (s *Store) Token(ctx context.Context, u User, provider string) (string, error) {
	var sealed []byte
	var keyID string
	err := s.db.Read().QueryRowContext(ctx, connectionQuery, u.Surface, u.ID, provider).Scan(&sealed, &keyID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%s connection of %s: %w", provider, u, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read %s's %s connection: %w", u, provider, err)
	}
	plain, err := s.open(sealed, keyID, connectionAAD(u, provider))
	if err != nil {
		return "", fmt.Errorf("%s connection of %s: %w", provider, u, err)
	}
	return string(plain), nil
}

// Disconnect removes the user's token for provider and reports whether
// there was one.
func (s *Store) Disconnect(ctx context.Context, u User, provider string) (bool, error) {
	return s.exec(ctx, fmt.Sprintf("delete %s's %s connection", u, provider), deleteConnectionQuery, u.Surface, u.ID, provider)
}

// Connections lists the user's connections (every user's when u is
// zero), without their tokens.
func (s *Store) Connections(ctx context.Context, u User) ([]Connection, error) {
	query, args := allConnectionsQuery, []any(nil)
	if u != (User{}) {
		query, args = userConnectionsQuery, []any{u.Surface, u.ID}
	}
	out, err := dbutil.Query(ctx, s.db.Read(), query, func(r dbutil.Scanner) (Connection, error) {
		var c Connection
		var created, updated int64
		err := r.Scan(&c.User.Surface, &c.User.ID, &c.Provider, &created, &updated)
		c.CreatedAt, c.UpdatedAt = dbutil.Time(created), dbutil.Time(updated)
		return c, err
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("list connections: %w", err)
	}
	return out, nil
}

func connectionAAD(u User, provider string) []byte {
	return []byte("connection\x00" + u.Surface + "\x00" + u.ID + "\x00" + provider)
}

// PutBlob seals data as the value of kind and id, replacing what was
// there.
func (s *Store) PutBlob(ctx context.Context, kind, id string, data []byte) error {
	if s.key == nil {
		return ErrNoKey
	}
	sealed := s.key.Seal(data, blobAAD(kind, id))
	if _, err := s.db.Write().ExecContext(ctx, upsertBlobQuery, kind, id, sealed, s.key.id, dbutil.Millis(s.now())); err != nil {
		return fmt.Errorf("store sealed %s %s: %w", kind, id, err)
	}
	return nil
}

// Blob opens the value of kind and id: ErrNotFound when there is none.
func (s *Store) Blob(ctx context.Context, kind, id string) ([]byte, error) {
	var sealed []byte
	var keyID string
	err := s.db.Read().QueryRowContext(ctx, blobQuery, kind, id).Scan(&sealed, &keyID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sealed %s %s: %w", kind, id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read sealed %s %s: %w", kind, id, err)
	}
	plain, err := s.open(sealed, keyID, blobAAD(kind, id))
	if err != nil {
		return nil, fmt.Errorf("sealed %s %s: %w", kind, id, err)
	}
	return plain, nil
}

// BlobIDs lists the ids stored under kind; it needs no key.
func (s *Store) BlobIDs(ctx context.Context, kind string) ([]string, error) {
	ids, err := dbutil.Query(ctx, s.db.Read(), blobIDsQuery, func(r dbutil.Scanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, kind)
	if err != nil {
		return nil, fmt.Errorf("list sealed %s: %w", kind, err)
	}
	return ids, nil
}

// DeleteBlob removes the value of kind and id.
func (s *Store) DeleteBlob(ctx context.Context, kind, id string) (bool, error) {
	return s.exec(ctx, fmt.Sprintf("delete sealed %s %s", kind, id), deleteBlobQuery, kind, id)
}

func blobAAD(kind, id string) []byte { return []byte("blob\x00" + kind + "\x00" + id) }

const sealedKeyIDsQuery = `SELECT key_id FROM secrets UNION SELECT key_id FROM user_connections
	UNION SELECT key_id FROM sealed_blobs`

// CheckKey says whether the store's key is the one its sealed values were
// sealed with: a wrong key (another install's, a typo'd file) would
// otherwise be taken, seal new values under a second key, and leave a
// store no single key opens. With no key set, or nothing sealed yet,
// there is nothing to check.
func (s *Store) CheckKey(ctx context.Context) error {
	if s.key == nil {
		return nil
	}
	rows, err := s.db.Read().QueryContext(ctx, sealedKeyIDsQuery)
	if err != nil {
		return fmt.Errorf("read the secrets store's key ids: %w", err)
	}
	defer rows.Close()
	var others []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("read the secrets store's key ids: %w", err)
		}
		if id != s.key.id {
			others = append(others, id)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the secrets store's key ids: %w", err)
	}
	if len(others) > 0 {
		return keyMismatch(fmt.Sprintf("the secrets store holds values sealed with key %s, but the key set (%s or secrets.key_file) is key %s; "+
			"set the key they were sealed with (then parley secrets rotate moves them to a new one)",
			strings.Join(others, ", "), EnvKey, s.key.id))
	}
	return nil
}

// keyMismatch is ErrWrongKey in words that name the keys.
type keyMismatch string

func (e keyMismatch) Error() string        { return string(e) }
func (e keyMismatch) Is(target error) bool { return target == ErrWrongKey }
