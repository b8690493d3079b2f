package gateway

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
)

// DMPolicy decides who may talk to the bot in a direct chat.
type DMPolicy string

const (
	// DMOpen lets anyone in.
	DMOpen DMPolicy = "open"
	// DMAllowlist lets in only the allowed users.
	DMAllowlist DMPolicy = "allowlist"
	// DMPairing lets in the allowed users and those an operator approved;
	// an unknown sender gets a one-time code to pass to the operator.
	DMPairing DMPolicy = "pairing"
)

// GroupPolicy decides when the bot answers in a group.
type GroupPolicy string

const (
	// GroupMention answers when the bot is mentioned or replied to; other
	// messages are kept as context and start no turn.
	GroupMention GroupPolicy = "mention"
	// GroupAlways answers every message.
	GroupAlways GroupPolicy = "always"
	// GroupNever ignores groups.
	GroupNever GroupPolicy = "never"
)

// GroupsPolicy decides which groups the bot takes part in at all.
type GroupsPolicy string

const (
	// GroupsPairing lets in the allowed groups and those an approved
	// person paired with /pair in the group. It is the zero value's
	// meaning too.
	GroupsPairing GroupsPolicy = "pairing"
	// GroupsAllowlist lets in only the allowed groups.
	GroupsAllowlist GroupsPolicy = "allowlist"
	// GroupsOpen lets in any group.
	GroupsOpen GroupsPolicy = "open"
)

// Access is one adapter's access policy. An adapter with none (the CLI,
// cron, webhooks, the API) lets everything in.
type Access struct {
	DM    DMPolicy
	Group GroupPolicy
	// Allow holds the platform user ids always let in.
	Allow map[string]bool
	// Groups decides which groups are let in; "" is GroupsPairing.
	Groups GroupsPolicy
	// AllowGroups holds the platform chat ids of groups always let in.
	AllowGroups map[string]bool
	// AckReaction, if set, is put on each message taken for a turn until
	// it is answered (the channel's ack_reaction).
	AckReaction string
}

// Pairing codes: 8 characters from an alphabet without look-alikes, valid
// for an hour, at most 3 waiting per adapter.
const (
	pairingCodeLen     = 8
	pairingAlphabet    = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	PairingTTL         = time.Hour
	MaxPendingPairings = 3
)

// decision is what the access policy says about one message.
type decision int

const (
	admit       decision = iota // run it
	contextOnly                 // keep it in the session; start no turn
	deny                        // drop it (it stays recorded as denied)
	pairingSent                 // denied, and the sender got a pairing reply
	answered                    // the access step answered it itself (/pair)
)

const (
	checkAllowedQuery = `SELECT 1 FROM allowed_users WHERE adapter = $1 AND user_id = $2`

	pendingPairingQuery = `SELECT code FROM pairing_requests
	WHERE adapter = $1 AND user_id = $2 AND approved_at IS NULL AND expires_at > $3`

	countPendingPairingsQuery = `SELECT COUNT(*) FROM pairing_requests
	WHERE adapter = $1 AND approved_at IS NULL AND expires_at > $2`

	insertPairingQuery = `INSERT INTO pairing_requests (code, adapter, user_id, chat_id, display_name, created_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7)`

	pairingByCodeQuery = `SELECT adapter, user_id, chat_id, display_name, expires_at, approved_at FROM pairing_requests WHERE code = $1`

	approvePairingQuery = `UPDATE pairing_requests SET approved_at = $2 WHERE code = $1 AND approved_at IS NULL`

	allowUserQuery = `INSERT INTO allowed_users (adapter, user_id, approved_at, code) VALUES ($1, $2, $3, $4)
	ON CONFLICT (adapter, user_id) DO NOTHING`

	listPairingsQuery = `SELECT code, adapter, user_id, chat_id, display_name, created_at, expires_at FROM pairing_requests
	WHERE approved_at IS NULL AND expires_at > $1 ORDER BY created_at`
)

// access decides what to do with a message under its adapter's policy.
// It answers a pairing request itself.
func (g *Gateway) access(ctx context.Context, j job) (decision, error) {
	pol, ok := g.policies().access[j.in.Adapter]
	if !ok {
		return admit, nil
	}
	if j.in.Group {
		if pol.Group == GroupNever {
			return deny, nil
		}
		if d, done, err := g.groupAccess(ctx, pol, j); done || err != nil {
			return d, err
		}
		switch pol.Group {
		case GroupAlways:
			return admit, nil
		default:
			if j.in.Mentioned {
				return admit, nil
			}
			return contextOnly, nil
		}
	}
	if pol.DM == DMOpen {
		return admit, nil
	}
	// An operator's block outweighs the config's allow list.
	blocked, allowed, err := g.opts.Store.accessOf(ctx, j.in.Adapter, j.in.UserID)
	if err != nil {
		return deny, err
	}
	if blocked {
		return deny, nil
	}
	if allowed || pol.Allow[j.in.UserID] {
		return admit, nil
	}
	if pol.DM != DMPairing {
		return deny, nil
	}
	code, created, err := g.opts.Store.requestPairing(ctx, j.in)
	var text string
	switch {
	case errors.Is(err, ErrTooManyPairings):
		g.opts.Log.InfoContext(ctx, "pairing request refused: too many waiting; approve or let them expire",
			"adapter", j.in.Adapter, "user_id", j.in.UserID, "waiting", MaxPendingPairings)
		text = "This bot is waiting on other access requests; please try again in an hour."
	case err != nil:
		return deny, err
	default:
		if created {
			// The operator approves it with this code.
			g.opts.Log.InfoContext(ctx, "pairing requested; approve with parley pairing approve CODE",
				"adapter", j.in.Adapter, "user_id", j.in.UserID, "display_name", j.in.DisplayName, "code", code, "expires_in", PairingTTL)
		}
		text = fmt.Sprintf("I don't know you yet. Your pairing code is %s: ask the bot's operator to run `parley pairing approve %s`. The code expires in an hour.", code, code)
	}
	g.complete(ctx, outcome{jobs: []job{j}, status: InboundDone, err: "denied: waiting for pairing", replyTo: j, text: text})
	return pairingSent, nil
}

// Allowed reports whether an operator approved the user on the adapter.
func (s *Store) Allowed(ctx context.Context, adapter adapters.ID, userID string) (bool, error) {
	var one int
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, checkAllowedQuery, adapter, userID).Scan(&one)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check the allowlist: %w", err)
	}
	return true, nil
}

// RequestPairing returns the sender's pairing code: the one already
// waiting, or a new one. ErrTooManyPairings means the adapter has
// MaxPendingPairings waiting already.
func (s *Store) RequestPairing(ctx context.Context, in adapters.Inbound) (string, error) {
	code, _, err := s.requestPairing(ctx, in)
	return code, err
}

// requestPairing is RequestPairing, also saying whether the code is new.
func (s *Store) requestPairing(ctx context.Context, in adapters.Inbound) (code string, created bool, err error) {
	now := s.now()
	err = s.db.Tx(ctx, func(q dbutil.Querier) error {
		err := q.QueryRowContext(ctx, pendingPairingQuery, in.Adapter, in.UserID, dbutil.Millis(now)).Scan(&code)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var pending int
		if err := q.QueryRowContext(ctx, countPendingPairingsQuery, in.Adapter, dbutil.Millis(now)).Scan(&pending); err != nil {
			return err
		}
		if pending >= MaxPendingPairings {
			return ErrTooManyPairings
		}
		if code, err = newPairingCode(); err != nil {
			return err
		}
		_, err = q.ExecContext(ctx, insertPairingQuery, code, in.Adapter, in.UserID, in.ChatID, in.DisplayName,
			dbutil.Millis(now), dbutil.Millis(now.Add(PairingTTL)))
		created = err == nil
		return err
	})
	if err != nil && !errors.Is(err, ErrTooManyPairings) {
		return "", false, fmt.Errorf("pairing request: %w", err)
	}
	return code, created && err == nil, err
}

func newPairingCode() (string, error) {
	b := make([]byte, pairingCodeLen)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a pairing code: %w", err)
	}
	for i := range b {
		b[i] = pairingAlphabet[int(b[i])%len(pairingAlphabet)]
	}
	return string(b), nil
}

// Pairing is a waiting or approved pairing request.
type Pairing struct {
	Code        string
	Adapter     adapters.ID
	UserID      string
	ChatID      string
	DisplayName string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// ApprovePairing lets the code's sender in and queues a line telling them.
// The code is matched without regard to case or spaces.
func (s *Store) ApprovePairing(ctx context.Context, code string) (Pairing, error) {
	code = strings.ToUpper(strings.Join(strings.Fields(code), ""))
	now := s.now()
	var p Pairing
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		var expires int64
		var approved sql.NullInt64
		var adapter string
		err := q.QueryRowContext(ctx, pairingByCodeQuery, code).Scan(&adapter, &p.UserID, &p.ChatID, &p.DisplayName, &expires, &approved)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no pairing request has code %q; `parley pairing ls` lists the waiting ones", ErrPairingNotFound, code)
		}
		if err != nil {
			return err
		}
		p.Code, p.Adapter, p.ExpiresAt = code, adapters.ID(adapter), dbutil.Time(expires)
		if approved.Valid {
			return fmt.Errorf("%w: code %s was approved already", ErrPairingNotFound, code)
		}
		if !now.Before(p.ExpiresAt) {
			return fmt.Errorf("%w: code %s expired at %s; ask the sender to write again for a new one", ErrPairingExpired, code, p.ExpiresAt.Format(time.RFC3339))
		}
		if _, err := q.ExecContext(ctx, approvePairingQuery, code, dbutil.Millis(now)); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, allowUserQuery, adapter, p.UserID, dbutil.Millis(now), code); err != nil {
			return err
		}
		return s.queueReplies(ctx, q, now, []Reply{{Key: pairingKeyPrefix + code, Adapter: p.Adapter, ChatID: p.ChatID,
			Text: "You're approved: send your message again and I'll answer."}})
	})
	if err != nil {
		return Pairing{}, err
	}
	return p, nil
}

// Pairings lists the requests waiting for approval.
func (s *Store) Pairings(ctx context.Context) ([]Pairing, error) {
	out, err := dbutil.ViewQuery(ctx, s.db, listPairingsQuery, func(r dbutil.Scanner) (Pairing, error) {
		var p Pairing
		var adapter string
		var created, expires int64
		err := r.Scan(&p.Code, &adapter, &p.UserID, &p.ChatID, &p.DisplayName, &created, &expires)
		p.Adapter, p.CreatedAt, p.ExpiresAt = adapters.ID(adapter), dbutil.Time(created), dbutil.Time(expires)
		return p, err
	}, dbutil.Millis(s.now()))
	if err != nil {
		return nil, fmt.Errorf("list pairing requests: %w", err)
	}
	return out, nil
}
