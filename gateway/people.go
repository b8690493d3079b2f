package gateway

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
)

const (
	// accessOfQuery reads, in one round trip, whether a person is blocked
	// and whether an operator approved them.
	accessOfQuery = `SELECT
	COALESCE((SELECT 1 FROM blocked_users WHERE adapter = $1 AND user_id = $2), 0),
	COALESCE((SELECT 1 FROM allowed_users WHERE adapter = $1 AND user_id = $2), 0)`

	revokeUserQuery = `DELETE FROM allowed_users WHERE adapter = $1 AND user_id = $2`

	blockUserQuery = `INSERT INTO blocked_users (adapter, user_id, display_name, blocked_at) VALUES ($1, $2, $3, $4)
	ON CONFLICT (adapter, user_id) DO NOTHING`

	unblockUserQuery = `DELETE FROM blocked_users WHERE adapter = $1 AND user_id = $2`

	// dropPendingPairingsQuery ends a blocked person's waiting requests.
	dropPendingPairingsQuery = `DELETE FROM pairing_requests WHERE adapter = $1 AND user_id = $2 AND approved_at IS NULL`

	// A person's name is the one their latest pairing request carried.
	approvedPeopleQuery = `SELECT a.adapter, a.user_id, a.approved_at,
	COALESCE((SELECT p.display_name FROM pairing_requests p WHERE p.adapter = a.adapter AND p.user_id = a.user_id
		ORDER BY p.created_at DESC LIMIT 1), '')
	FROM allowed_users a`

	blockedPeopleQuery = `SELECT b.adapter, b.user_id, b.blocked_at,
	COALESCE(NULLIF(b.display_name, ''), (SELECT p.display_name FROM pairing_requests p WHERE p.adapter = b.adapter AND p.user_id = b.user_id
		ORDER BY p.created_at DESC LIMIT 1), '')
	FROM blocked_users b`

	personNameQuery = `SELECT display_name FROM pairing_requests WHERE adapter = $1 AND user_id = $2 ORDER BY created_at DESC LIMIT 1`

	// latestInboundQuery is a chat's latest message as received.
	latestInboundQuery = `SELECT payload FROM inbound WHERE adapter = $1 AND chat_id = $2 ORDER BY received_at DESC LIMIT 1`
)

// Person states on the dashboard's people page.
const (
	PersonApproved = "approved"
	PersonPending  = "pending"
	PersonBlocked  = "blocked"
)

// Person is someone a channel's access policy knows: approved, waiting
// with a pairing code, or blocked.
type Person struct {
	Adapter adapters.ID
	UserID  string
	// Name is the display name the channel gave; "" when it gave none.
	Name  string
	State string
	// Since is when they were approved, asked or were blocked.
	Since time.Time
	// Code is a pending person's pairing code.
	Code      string
	ExpiresAt time.Time
}

// Label is the person's name, or their id when the channel gave no name.
func (p Person) Label() string { return cmp.Or(p.Name, p.UserID) }

// accessOf says whether the person is blocked, and whether approved.
func (s *Store) accessOf(ctx context.Context, adapter adapters.ID, userID string) (blocked, allowed bool, err error) {
	var b, a int
	err = s.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, accessOfQuery, adapter, userID).Scan(&b, &a)
	})
	if err != nil {
		return false, false, fmt.Errorf("check the allowlist: %w", err)
	}
	return b == 1, a == 1, nil
}

// People lists those approved, waiting and blocked on every channel, by
// channel and then name.
func (s *Store) People(ctx context.Context) ([]Person, error) {
	scan := func(state string) func(r dbutil.Scanner) (Person, error) {
		return func(r dbutil.Scanner) (Person, error) {
			p := Person{State: state}
			var adapter string
			var since int64
			err := r.Scan(&adapter, &p.UserID, &since, &p.Name)
			p.Adapter, p.Since = adapters.ID(adapter), dbutil.Time(since)
			return p, err
		}
	}
	approved, err := dbutil.ViewQuery(ctx, s.db, approvedPeopleQuery, scan(PersonApproved))
	if err != nil {
		return nil, fmt.Errorf("list approved people: %w", err)
	}
	blocked, err := dbutil.ViewQuery(ctx, s.db, blockedPeopleQuery, scan(PersonBlocked))
	if err != nil {
		return nil, fmt.Errorf("list blocked people: %w", err)
	}
	pending, err := s.Pairings(ctx)
	if err != nil {
		return nil, err
	}
	out := append(approved, blocked...)
	for _, p := range pending {
		out = append(out, Person{Adapter: p.Adapter, UserID: p.UserID, Name: p.DisplayName, State: PersonPending,
			Since: p.CreatedAt, Code: p.Code, ExpiresAt: p.ExpiresAt})
	}
	slices.SortFunc(out, func(a, b Person) int {
		return cmp.Or(cmp.Compare(a.Adapter, b.Adapter), cmp.Compare(a.Label(), b.Label()), cmp.Compare(a.UserID, b.UserID))
	})
	return out, nil
}

// Revoke takes back a person's approval on a channel: their next message
// is refused, and under dm_policy "pairing" it gets a new pairing code.
// It reports whether they had been approved.
func (s *Store) Revoke(ctx context.Context, adapter adapters.ID, userID string) (bool, error) {
	res, err := s.db.Write().ExecContext(ctx, revokeUserQuery, adapter, userID)
	if err != nil {
		return false, fmt.Errorf("revoke %s on %s: %w", userID, adapter, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Block refuses a person's messages on a channel from now on, without a
// pairing code: their approval and waiting requests go. It reports
// whether they were not blocked already.
func (s *Store) Block(ctx context.Context, adapter adapters.ID, userID string) (bool, error) {
	blocked := false
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		var name string
		if err := q.QueryRowContext(ctx, personNameQuery, adapter, userID).Scan(&name); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		res, err := q.ExecContext(ctx, blockUserQuery, adapter, userID, name, dbutil.Millis(s.now()))
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		blocked = n > 0
		if _, err := q.ExecContext(ctx, revokeUserQuery, adapter, userID); err != nil {
			return err
		}
		_, err = q.ExecContext(ctx, dropPendingPairingsQuery, adapter, userID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("block %s on %s: %w", userID, adapter, err)
	}
	return blocked, nil
}

// Unblock lets a blocked person ask to pair again. It reports whether
// they had been blocked.
func (s *Store) Unblock(ctx context.Context, adapter adapters.ID, userID string) (bool, error) {
	res, err := s.db.Write().ExecContext(ctx, unblockUserQuery, adapter, userID)
	if err != nil {
		return false, fmt.Errorf("unblock %s on %s: %w", userID, adapter, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// NameIn is the display name the channel gave with the latest message
// user sent in chat, "" when it gave none (or the message was from someone
// else, or was deleted with its session).
func (s *Store) NameIn(ctx context.Context, adapter adapters.ID, chat, user string) (string, error) {
	var payload string
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, latestInboundQuery, adapter, chat).Scan(&payload)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the latest message of chat %s on %s: %w", chat, adapter, err)
	}
	var in adapters.Inbound
	if json.Unmarshal([]byte(payload), &in) != nil || in.UserID != user {
		return "", nil
	}
	return in.DisplayName, nil
}
