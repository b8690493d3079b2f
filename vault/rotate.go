package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyd/parley/dbutil"
)

const (
	sealedSecretsQuery     = `SELECT name, value, key_id FROM secrets ORDER BY name`
	resealSecretQuery      = `UPDATE secrets SET value = $2, key_id = $3 WHERE name = $1`
	sealedConnectionsQuery = `SELECT surface, user_id, provider, value, key_id FROM user_connections ORDER BY surface, user_id, provider`
	resealConnectionQuery  = `UPDATE user_connections SET value = $4, key_id = $5 WHERE surface = $1 AND user_id = $2 AND provider = $3`
	sealedBlobsQuery       = `SELECT kind, id, value, key_id FROM sealed_blobs ORDER BY kind, id`
	resealBlobQuery        = `UPDATE sealed_blobs SET value = $3, key_id = $4 WHERE kind = $1 AND id = $2`
)

// Rotated counts what a rotation sealed again under the new key.
type Rotated struct {
	Secrets     int `json:"secrets"`
	Connections int `json:"connections"`
	Blobs       int `json:"sealed_values"`
	// Already counts values that were under the new key before: a
	// rotation that was run twice.
	Already int `json:"already"`
}

// Total is every value sealed again.
func (r Rotated) Total() int { return r.Secrets + r.Connections + r.Blobs }

// sealedRow is one sealed value, with how to open it and write it back.
type sealedRow struct {
	what   string
	aad    []byte
	value  []byte
	keyID  string
	update func(q dbutil.Querier, sealed []byte, keyID string) error
	count  *int
}

// Rotate opens every sealed value (secrets, connections, sealed blobs)
// with the store's key and seals it again under newKey, in one
// transaction: either every value moves to the new key or none does.
// A value sealed with neither key stops it with ErrWrongKey.
func (s *Store) Rotate(ctx context.Context, newKey *Key) (Rotated, error) {
	if newKey == nil {
		return Rotated{}, fmt.Errorf("%w: no new key given", ErrBadKey)
	}
	var res Rotated
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		res = Rotated{}
		rows, err := s.sealedRows(ctx, q, &res)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.keyID == newKey.id {
				res.Already++
				continue
			}
			plain, err := s.open(r.value, r.keyID, r.aad)
			if errors.Is(err, ErrNoKey) {
				return fmt.Errorf("%s: %w; set %s to the key the secrets were written with (the new one goes in %s)", r.what, ErrNoKey, EnvKey, EnvNewKey)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", r.what, err)
			}
			if err := r.update(q, newKey.Seal(plain, r.aad), newKey.id); err != nil {
				return fmt.Errorf("seal %s again: %w", r.what, err)
			}
			*r.count++
		}
		return nil
	})
	if err != nil {
		return Rotated{}, fmt.Errorf("rotate the secrets key (nothing changed): %w", err)
	}
	return res, nil
}

// sealedRows reads every sealed value in q.
func (s *Store) sealedRows(ctx context.Context, q dbutil.Querier, res *Rotated) ([]sealedRow, error) {
	secrets, err := dbutil.Query(ctx, q, sealedSecretsQuery, func(r dbutil.Scanner) (sealedRow, error) {
		var name string
		row := sealedRow{count: &res.Secrets}
		if err := r.Scan(&name, &row.value, &row.keyID); err != nil {
			return row, err
		}
		row.what, row.aad = "secret "+name, secretAAD(name)
		row.update = func(q dbutil.Querier, sealed []byte, keyID string) error {
			_, err := q.ExecContext(ctx, resealSecretQuery, name, sealed, keyID)
			return err
		}
		return row, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	conns, err := dbutil.Query(ctx, q, sealedConnectionsQuery, func(r dbutil.Scanner) (sealedRow, error) {
		var u User
		var provider string
		row := sealedRow{count: &res.Connections}
		if err := r.Scan(&u.Surface, &u.ID, &provider, &row.value, &row.keyID); err != nil {
			return row, err
		}
		row.what, row.aad = fmt.Sprintf("%s connection of %s", provider, u), connectionAAD(u, provider)
		row.update = func(q dbutil.Querier, sealed []byte, keyID string) error {
			_, err := q.ExecContext(ctx, resealConnectionQuery, u.Surface, u.ID, provider, sealed, keyID)
			return err
		}
		return row, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read connections: %w", err)
	}
	blobs, err := dbutil.Query(ctx, q, sealedBlobsQuery, func(r dbutil.Scanner) (sealedRow, error) {
		var kind, id string
		row := sealedRow{count: &res.Blobs}
		if err := r.Scan(&kind, &id, &row.value, &row.keyID); err != nil {
			return row, err
		}
		row.what, row.aad = fmt.Sprintf("sealed %s %s", kind, id), blobAAD(kind, id)
		row.update = func(q dbutil.Querier, sealed []byte, keyID string) error {
			_, err := q.ExecContext(ctx, resealBlobQuery, kind, id, sealed, keyID)
			return err
		}
		return row, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read sealed values: %w", err)
	}
	return append(append(secrets, conns...), blobs...), nil
}
