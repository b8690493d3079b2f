package gateway

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
)

// InboundStatus is where an accepted platform message stands.
type InboundStatus string

const (
	// InboundAccepted: stored and acknowledged, not yet answered.
	InboundAccepted InboundStatus = "accepted"
	// InboundDone: its turn finished and any reply is in the outbox.
	InboundDone InboundStatus = "done"
	// InboundFailed: its turn failed; the user was told.
	InboundFailed InboundStatus = "failed"
	// InboundMarked: left unanswered by a crash, and marked rather than re-run.
	InboundMarked InboundStatus = "marked"
)

const (
	acceptInboundQuery = `INSERT INTO inbound (id, adapter, chat_id, platform_message_id, payload, received_at, updated_at, owner, lease_until, instance)
	VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9)
	ON CONFLICT DO NOTHING`

	// Only an unanswered message is finished: if another replica took it
	// over and answered first, this answer is dropped, not sent twice.
	// $6 is always 'accepted', a parameter so that no plan can take the
	// partial index inbound_unfinished, whose condition a literal matches:
	// PostgreSQL's generic plan for a table without statistics yet (a new
	// database) did, and scanned every unanswered message for the one.
	finishInboundQuery = `UPDATE inbound SET status = $2, session_id = COALESCE($3, session_id), error = $4, updated_at = $5
	WHERE id = $1 AND status = $6`

	// A turn stores each message's user message under the message's own
	// id, so the join finds the session a crash interrupted, if any. Which
	// rows: every one when one process owns the database ($2), or this
	// replica's own when it is starting ($5, with $3 the owner), as long as
	// an earlier run of the process accepted it ($10 is this run; what it
	// accepted itself is in its lanes); and any whose owner's lease lapsed
	// ($4 is now): a replica that died.
	//
	// The order is the one the lanes would have run them in: first the
	// messages whose turn had begun (their user message is stored: the
	// interrupted turn), in the order they were stored, then the rest in
	// accept order. Accept order alone would re-run the interrupted turn
	// after a message accepted a moment earlier but queued behind it.
	// ($6, $7, $8, $9) pages on from the last row of the previous page.
	unfinishedInboundQuery = `SELECT i.id, i.payload, COALESCE(i.session_id, m.session_id, ''), i.received_at,
		CASE WHEN m.id IS NULL THEN 1 ELSE 0 END, COALESCE(m.created_at, 0), COALESCE(m.seq, 0), i.owner
	FROM inbound i LEFT JOIN messages m ON m.id = i.id
	WHERE i.status = 'accepted'
	AND ((($2 OR (i.owner = $3 AND $5)) AND i.instance <> $10) OR (i.owner <> $3 AND i.lease_until < $4))
	AND (CASE WHEN m.id IS NULL THEN 1 ELSE 0 END, COALESCE(m.created_at, 0), COALESCE(m.seq, 0), i.received_at, i.id) > ($6, $7, $8, $11, $9)
	ORDER BY CASE WHEN m.id IS NULL THEN 1 ELSE 0 END, COALESCE(m.created_at, 0), COALESCE(m.seq, 0), i.received_at, i.id LIMIT $1`

	inboundOfQuery = `SELECT id, status, COALESCE(session_id, ''), error FROM inbound
	WHERE adapter = $1 AND chat_id = $2 AND platform_message_id = $3`

	// Among replicas, the sessions' lanes a dead replica held pass, with
	// its messages, to the replica taking them over: its messages run
	// there first, in its order, and a newer message of one of its
	// sessions is handed to that replica, behind them (the lane of a dead
	// replica with messages not yet taken over is no one else's to claim,
	// cluster.Member.Claim).
	takeLanesQuery = `UPDATE holds SET instance = $1, since = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
	WHERE instance = ANY($2) AND instance <> $1 AND name LIKE 'lane:%'`

	// $4 is always 'accepted', a parameter for the reason finishInboundQuery's is.
	takeInboundQuery = `UPDATE inbound SET owner = $2, lease_until = $3, lane = NULL WHERE id = $1 AND status = $4`

	// Among replicas (Store.Cluster), a dead replica is one with no live
	// row in replicas: fenced, or never registered (an older version's).
	deadOwnerLease   = `i.lease_until < $4`
	deadOwnerCluster = `$4::BIGINT > 0 AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.instance = i.owner AND r.fenced_at IS NULL)`

	// One replica takes over at a time, so a dead replica's messages are
	// not split between two, each running some of a session's.
	takeOverLockQuery = `SELECT pg_advisory_xact_lock(1885434466, 0)`

	renewInboundQuery = `UPDATE inbound SET lease_until = $2 WHERE owner = $1 AND status = 'accepted' AND lease_until < $3`

	queueReplyQuery = `INSERT INTO outbox (id, idempotency_key, session_id, inbound_id, adapter, chat_id, reply_to, text, next_attempt_at, created_at, edit_message_id, origin,
		file_session_id, file_name, speak)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13, $14)
	ON CONFLICT (idempotency_key) DO NOTHING`

	// Only a chat's oldest pending reply is due, so a chat's replies go out
	// in order even when one of them has to wait for a retry.
	dueRepliesQuery = `SELECT id, idempotency_key, COALESCE(session_id, ''), COALESCE(inbound_id, ''), adapter, chat_id, reply_to, text, attempts, edit_message_id,
		file_session_id, file_name, speak
	FROM outbox o WHERE status = 'pending' AND next_attempt_at <= $1 AND lease_until <= $1
	AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.status = 'pending' AND e.adapter = o.adapter AND e.chat_id = o.chat_id AND e.id < o.id)
	ORDER BY next_attempt_at, id LIMIT $2`

	// When the next pending reply may be claimed: its retry's time, or
	// when a claim on it lapses, whichever is later.
	nextDueQuery = `SELECT MIN(CASE WHEN lease_until > next_attempt_at THEN lease_until ELSE next_attempt_at END)
	FROM outbox WHERE status = 'pending'`

	// The due replies, claimed in one statement. The claim is a lease of
	// its own (lease_until), apart from next_attempt_at, the platform's
	// backoff: a claim taken back never cuts a backoff short. RETURNING gives the
	// counts after the claim; the reply carries those before it. The limit
	// is written into the text (claimDueSQL): SQLite compiles a statement
	// again at every run when a subquery's LIMIT is a parameter, which
	// tripled the claim's cost. On PostgreSQL the pick locks its rows and
	// skips those another replica's claim holds (claimDueLock): a row
	// changed meanwhile is checked again as it now stands, and a chat's
	// newer reply waits as long as an older one is pending in the pick's
	// snapshot, so each reply is claimed once and a chat's go in order.
	claimDueQuery = `UPDATE outbox SET attempts = attempts + 1, lease_until = $2, claim_owner = $3, claim_instance = $4
	WHERE id IN (SELECT id FROM outbox o WHERE status = 'pending' AND next_attempt_at <= $1 AND lease_until <= $1
		AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.status = 'pending' AND e.adapter = o.adapter AND e.chat_id = o.chat_id AND e.id < o.id)
		%sORDER BY next_attempt_at, id LIMIT %d%s)
	RETURNING id, idempotency_key, COALESCE(session_id, ''), COALESCE(inbound_id, ''), adapter, chat_id, reply_to, text, attempts - 1, edit_message_id,
		file_session_id, file_name, speak`
	claimDueLock = ` FOR UPDATE SKIP LOCKED`

	// Among replicas: a channel's replies are claimed by the replica that
	// holds the channel ($5); the replies to a replica's own channels
	// ($6: the API, webhooks) by the replica that queued them, or by any
	// once it is dead.
	claimDueChannels = `AND (o.adapter = ANY($5) OR (o.adapter = ANY($6) AND (o.origin = $3
			OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.instance = o.origin AND r.fenced_at IS NULL))))
		`

	// The notes to a chat: rows that answer no inbound message, except the
	// gateway's own pairing approvals.
	recentNotesQuery = `SELECT idempotency_key, text, file_name FROM outbox
	WHERE adapter = $1 AND chat_id = $2 AND inbound_id IS NULL AND created_at >= $3
	AND status <> 'failed' AND idempotency_key NOT LIKE '` + pairingKeyPrefix + `%'
	ORDER BY created_at DESC, id DESC LIMIT 200`

	// Whether the outbox holds any reply queued with no inbound message
	// (a pairing approval's too: RecentNotes then reads, as it must).
	anyNoteQuery = `SELECT EXISTS (SELECT 1 FROM outbox WHERE inbound_id IS NULL)`

	// One chunk of a note, by its key.
	noteChunkQuery = `SELECT status, attempts, last_error FROM outbox WHERE idempotency_key = $1`

	// pairingKeyPrefix starts the outbox key of a pairing approval's reply.
	pairingKeyPrefix = "pairing:"

	markSentQuery = `UPDATE outbox SET status = 'sent', platform_message_id = $2, sent_at = $3, last_error = ''
	WHERE id = $1`

	// Only a pending reply: a sender whose lease lapsed must not bring
	// back one that another sender has sent meanwhile. $5 is always
	// 'pending', a parameter so that no plan takes the partial index on
	// pending replies for a lookup by id (see finishInboundQuery).
	markRetryQuery = `UPDATE outbox SET status = $2, last_error = $3, next_attempt_at = $4, lease_until = 0 WHERE id = $1 AND status = $5`

	// A restarted process takes back at once the replies its previous life
	// claimed and never recorded: no other process can be sending them,
	// as the SQLite file lock proves.
	reclaimQuery = `UPDATE outbox SET lease_until = 0
	WHERE status = 'pending' AND lease_until > $1 AND claim_instance <> $2`

	// A live sender's own claims, taken back once the database answers
	// again after it missed a claim's answer or a send's record: nothing
	// of this sender is in flight then.
	reclaimOwnQuery = `UPDATE outbox SET lease_until = 0
	WHERE status = 'pending' AND lease_until > $1 AND claim_instance = $2`

	// Among replicas: the replies dead (fenced) replicas claimed and never
	// recorded are due again at once, not when their claims lapse.
	reclaimDeadQuery = `UPDATE outbox SET lease_until = 0
	WHERE status = 'pending' AND lease_until > $1 AND claim_owner <> $2
	AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.instance = outbox.claim_owner AND r.fenced_at IS NULL)`
)

// unfinishedClusterQuery is unfinishedInboundQuery among replicas.
var unfinishedClusterQuery = strings.Replace(unfinishedInboundQuery, deadOwnerLease, deadOwnerCluster, 1)

// Store keeps the gateway's durable records: accepted inbound messages and
// the outbox of replies.
type Store struct {
	db    *dbutil.DB
	now   func() time.Time
	owner string
	lease time.Duration
	// instance names this run of the process in the messages it accepts:
	// those of earlier runs are left for recovery.
	instance string
	// cluster: replicas share the database (see Cluster).
	cluster bool
	// channels, when set, are the channels whose replies this replica
	// sends (see ClaimChannels).
	channels func() (held, own []string)
	// notes is what the store knows of the notes in the outbox of a
	// SQLite file this process holds (see RecentNotes).
	notes atomic.Int32
}

// What a store knows of the notes in a held file's outbox.
const (
	notesUnknown int32 = iota
	notesNone          // a read found none, and none was queued since
	notesSome
)

// DefaultLease is how long a replica's claim on the messages it accepted
// lasts without renewal.
const DefaultLease = time.Minute

// StoreOption configures a Store.
type StoreOption func(*Store)

// Owner names this replica in the messages it accepts, so a restart of the
// same replica takes its own unanswered messages back at once. Replicas
// sharing a PostgreSQL database need distinct owners.
func Owner(id string) StoreOption { return func(s *Store) { s.owner = id } }

// Lease sets how long an accepted message stays this replica's without
// renewal (default DefaultLease).
func Lease(d time.Duration) StoreOption { return func(s *Store) { s.lease = d } }

// Cluster makes the store one of several replicas' (package cluster): a
// dead replica is one fenced or unregistered rather than one whose
// message leases lapsed, and replies are claimed per channel (ClaimChannels).
func Cluster() StoreOption { return func(s *Store) { s.cluster = true } }

// ClaimChannels limits the replies this replica claims: those to the channels
// it holds, and to its own channels (the API, webhooks) those it queued
// itself or whose queuer is dead.
func ClaimChannels(f func() (held, own []string)) StoreOption {
	return func(s *Store) { s.channels = f }
}

// holds says whether this replica runs the channel adapter: it alone
// acts in the channel's chats (always, without replicas).
func (s *Store) holds(adapter string) bool {
	if s.channels == nil {
		return true
	}
	held, _ := s.channels()
	return slices.Contains(held, adapter)
}

// NewStore returns a Store on a migrated database; now may be nil for time.Now.
func NewStore(db *dbutil.DB, now func() time.Time, opts ...StoreOption) *Store {
	if now == nil {
		now = time.Now
	}
	s := &Store{db: db, now: now, lease: DefaultLease, instance: uuid.NewString()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Shared reports whether other processes may use the database at once
// (PostgreSQL); a SQLite file is locked by one daemon.
func (s *Store) Shared() bool { return s.db.Dialect == dbutil.Postgres }

// AcceptedInbound is an inbound message as stored.
type AcceptedInbound struct {
	ID      string
	Inbound adapters.Inbound
	// SessionID is set once a turn for the message started.
	SessionID string
	// order is the row's place in recovery's order (unfinishedInboundQuery).
	order recoveryOrder
}

// recoveryOrder is where an unfinished message stands in the order the
// lanes would have run it: not started after started, then by when its
// user message was stored, then by when it was accepted.
type recoveryOrder struct {
	notStarted    int
	storedAt, seq int64
	receivedAt    int64
	id            string
}

// Accept stores in durably. dup reports that the same platform message was
// accepted before, in which case nothing changes.
func (s *Store) Accept(ctx context.Context, in adapters.Inbound) (id string, dup bool, err error) {
	return s.AcceptWith(ctx, in, nil)
}

// AcceptWith is Accept that also runs also in the same transaction when the
// message is new: a producer's own record of it (a webhook delivery) then
// commits, or not, with it. An error from also undoes both.
func (s *Store) AcceptWith(ctx context.Context, in adapters.Inbound, also func(q dbutil.Querier) error) (id string, dup bool, err error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", false, fmt.Errorf("generate id: %w", err)
	}
	return s.accept(ctx, in, u, also)
}

// AcceptAnswered stores in as a message answered already (status done),
// with also (given its id) in the same transaction: a message the gateway
// answers itself, which recovery must never run as a turn.
func (s *Store) AcceptAnswered(ctx context.Context, in adapters.Inbound, also func(q dbutil.Querier, id string) error) (id string, dup bool, err error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", false, fmt.Errorf("generate id: %w", err)
	}
	return s.accept(ctx, in, u, func(q dbutil.Querier) error {
		if _, err := q.ExecContext(ctx, finishInboundQuery, u.String(), string(InboundDone), nil, "", dbutil.Millis(s.now()), string(InboundAccepted)); err != nil {
			return fmt.Errorf("finish inbound %s: %w", u, err)
		}
		return also(q, u.String())
	})
}

func (s *Store) accept(ctx context.Context, in adapters.Inbound, u uuid.UUID, also func(q dbutil.Querier) error) (id string, dup bool, err error) {
	payload, err := json.Marshal(in)
	if err != nil {
		return "", false, fmt.Errorf("encode inbound %s: %w", in.MessageID, err)
	}
	now := s.now()
	args := []any{u.String(), in.Adapter, in.ChatID, in.MessageID,
		string(payload), dbutil.Millis(now), s.owner, dbutil.Millis(now.Add(s.lease)), s.instance}
	var n int64
	store := func(q dbutil.Querier) error {
		res, err := q.ExecContext(ctx, acceptInboundQuery, args...)
		if err != nil {
			return fmt.Errorf("store inbound %s/%s/%s: %w", in.Adapter, in.ChatID, in.MessageID, err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("store inbound: %w", err)
		}
		if n == 1 && also != nil {
			return also(q)
		}
		return nil
	}
	if also == nil {
		err = store(s.db.Write())
	} else {
		err = s.db.Tx(ctx, store)
	}
	if err != nil {
		// The id goes back with the error: a commit whose answer the
		// connection lost may have gone through all the same.
		return u.String(), false, err
	}
	return u.String(), n == 0, nil
}

// Unfinished takes over accepted messages that never got an answer, oldest
// first, leasing them to this replica: those whose owner stopped renewing
// its lease (a replica that died) and, with starting set, this replica's
// own from before its restart. On SQLite, where one process owns the file,
// it takes every one.
//
// Pass the last one taken as after to page on (the zero value starts).
func (s *Store) Unfinished(ctx context.Context, limit int, starting bool, after ...AcceptedInbound) ([]AcceptedInbound, error) {
	from := recoveryOrder{notStarted: -1}
	if len(after) > 0 {
		from = after[0].order
	}
	now := s.now()
	var out []AcceptedInbound
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		out = out[:0]
		query := unfinishedInboundQuery
		if s.cluster {
			query = unfinishedClusterQuery
			if _, err := q.ExecContext(ctx, takeOverLockQuery); err != nil {
				return fmt.Errorf("take over unanswered messages: %w", err)
			}
		} else if s.Shared() {
			query += " FOR UPDATE OF i SKIP LOCKED"
		}
		rows, err := q.QueryContext(ctx, query, limit, !s.Shared(), s.owner, dbutil.Millis(now), starting,
			from.notStarted, from.storedAt, from.seq, from.id, s.instance, from.receivedAt)
		if err != nil {
			return fmt.Errorf("list unfinished inbound: %w", err)
		}
		defer rows.Close()
		var owners []string
		for rows.Next() {
			var a AcceptedInbound
			var payload, owner string
			o := &a.order
			if err := rows.Scan(&a.ID, &payload, &a.SessionID, &o.receivedAt, &o.notStarted, &o.storedAt, &o.seq, &owner); err != nil {
				return fmt.Errorf("list unfinished inbound: %w", err)
			}
			if owner != s.owner && !slices.Contains(owners, owner) {
				owners = append(owners, owner)
			}
			if err := json.Unmarshal([]byte(payload), &a.Inbound); err != nil {
				return fmt.Errorf("inbound %s payload: %w", a.ID, err)
			}
			o.id = a.ID
			out = append(out, a)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("list unfinished inbound: %w", err)
		}
		rows.Close()
		if s.cluster && len(owners) > 0 {
			if _, err := q.ExecContext(ctx, takeLanesQuery, s.owner, owners); err != nil {
				return fmt.Errorf("take over the lanes of dead replicas: %w", err)
			}
		}
		for _, a := range out {
			if _, err := q.ExecContext(ctx, takeInboundQuery, a.ID, s.owner, dbutil.Millis(now.Add(s.lease)), string(InboundAccepted)); err != nil {
				return fmt.Errorf("take over inbound %s: %w", a.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Unanswered counts the accepted messages not yet answered, on every replica.
func (s *Store) Unanswered(ctx context.Context) (int, error) {
	var n int
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, "SELECT COUNT(*) FROM inbound WHERE status = 'accepted'").Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("count unanswered messages: %w", err)
	}
	return n, nil
}

// Renew extends this replica's lease on the messages it is still answering.
// Call it well within the lease.
func (s *Store) Renew(ctx context.Context) error {
	now := s.now()
	// Renew only leases past a third of their life: a quiet replica
	// writes nothing.
	_, err := s.db.Write().ExecContext(ctx, renewInboundQuery, s.owner, dbutil.Millis(now.Add(s.lease)),
		dbutil.Millis(now.Add(s.lease*2/3)))
	if err != nil {
		return fmt.Errorf("renew the lease on accepted messages: %w", err)
	}
	return nil
}

// Reply is one outbox row: a chunk of a reply to send.
type Reply struct {
	ID string
	// Key is unique per chunk of a reply, e.g. "<message id>:<chunk>", so
	// queueing the same reply again adds nothing.
	Key       string
	SessionID string
	InboundID string
	Adapter   adapters.ID
	ChatID    string
	ReplyTo   string
	Text      string
	Attempts  int
	// EditMessageID, when set, makes this reply the final edit of a
	// message already shown (a streamed reply) instead of a new message.
	EditMessageID string
	// FileSession and FileName, when set, make this reply a file of that
	// session's file store, read when it is sent; Text is its caption.
	FileSession string
	FileName    string
	// Speak makes this reply a voice note: the sender synthesizes Text
	// when it sends it (SenderOptions.Speaker), and sends Text itself
	// when it can't.
	Speak bool
}

// Note is one message of a note sent to a chat: a chunk of a cron report,
// say, as the chat shows it.
type Note struct {
	// Key is the chunk's outbox key, "<note>:<chunk>".
	Key  string
	Text string
}

// RecentNotes returns the messages of the newest notes (at most limit)
// queued for chatID on adapter since since, oldest first: replies queued
// with no inbound message, such as cron reports, one Note a chunk.
//
// Each new session's first turn asks (a cron report sent to the chat is
// what the bot last said there). On a SQLite file this process holds,
// where every note is queued through this store, a file whose outbox has
// never held one answers with no read after the first: under load, reads
// beside the single writer slow it.
func (s *Store) RecentNotes(ctx context.Context, adapter adapters.ID, chatID string, since time.Time, limit int) ([]Note, error) {
	held := s.db.Mark() != dbutil.NoMark
	if held && s.notes.Load() == notesNone {
		return nil, nil
	}
	var out []Note
	var checked, exists bool
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		if held && s.notes.Load() == notesUnknown {
			if err := q.QueryRowContext(ctx, anyNoteQuery).Scan(&exists); err != nil {
				return err
			}
			if checked = true; !exists {
				return nil
			}
		}
		rows, err := q.QueryContext(ctx, recentNotesQuery, adapter, chatID, dbutil.Millis(since))
		if err != nil {
			return err
		}
		defer rows.Close()
		notes := map[string]bool{}
		for rows.Next() {
			var n Note
			var file string
			if err := rows.Scan(&n.Key, &n.Text, &file); err != nil {
				return err
			}
			if file != "" {
				n.Text = noteFileText(file, n.Text)
			}
			note := n.Key
			if i := strings.LastIndexByte(n.Key, ':'); i >= 0 {
				note = n.Key[:i]
			}
			if !notes[note] && len(notes) == limit {
				continue // an older note's chunk
			}
			notes[note] = true
			out = append(out, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read the notes to %s:%s: %w", adapter, chatID, err)
	}
	if checked && !exists {
		// Unless a note was queued meanwhile: that store of notesSome
		// stands.
		s.notes.CompareAndSwap(notesUnknown, notesNone)
		return nil, nil
	}
	if checked {
		s.notes.Store(notesSome)
	}
	slices.Reverse(out)
	return out, nil
}

// QueueReplies writes replies to the outbox in one transaction. Replies
// whose key is already there are skipped.
func (s *Store) QueueReplies(ctx context.Context, replies []Reply) error {
	return s.Complete(ctx, nil, "", "", "", replies)
}

// Complete records how accepted messages ended and queues their reply in
// one transaction, so a message is never marked answered without its reply,
// nor its reply queued while it still looks unanswered.
func (s *Store) Complete(ctx context.Context, inboundIDs []string, status InboundStatus, sessionID, errText string, replies []Reply) error {
	return s.db.Tx(ctx, func(q dbutil.Querier) error {
		return s.CompleteIn(ctx, q, inboundIDs, status, sessionID, errText, replies)
	})
}

// CompleteWith is Complete, with also run in the same transaction (a
// Reporter's notes).
func (s *Store) CompleteWith(ctx context.Context, inboundIDs []string, status InboundStatus, sessionID, errText string, replies []Reply,
	also func(context.Context, dbutil.Querier) error) error {
	return s.db.Tx(ctx, func(q dbutil.Querier) error {
		if err := s.CompleteIn(ctx, q, inboundIDs, status, sessionID, errText, replies); err != nil {
			return err
		}
		return also(ctx, q)
	})
}

// CompleteIn is Complete inside the caller's transaction q: a turn's
// reply, stored in its session, commits with its outcome (see
// TurnInput.Finish). A message answered already fails it with ErrNotFound.
func (s *Store) CompleteIn(ctx context.Context, q dbutil.Querier, inboundIDs []string, status InboundStatus, sessionID, errText string, replies []Reply) error {
	nowT := s.now()
	now := dbutil.Millis(nowT)
	sid := sql.NullString{String: sessionID, Valid: sessionID != ""}
	for _, id := range inboundIDs {
		res, err := q.ExecContext(ctx, finishInboundQuery, id, string(status), sid, errText, now, string(InboundAccepted))
		if err != nil {
			return fmt.Errorf("finish inbound %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("finish inbound %s (unknown, or answered already): %w", id, ErrNotFound)
		}
	}
	return s.queueReplies(ctx, q, nowT, replies)
}

// Finished reports whether every one of the accepted messages ids has an
// outcome recorded (it is no longer waiting for an answer).
func (s *Store) Finished(ctx context.Context, ids []string) (bool, error) {
	for _, id := range ids {
		status, err := s.Status(ctx, id)
		if err != nil {
			return false, err
		}
		if status == InboundAccepted {
			return false, nil
		}
	}
	return true, nil
}

// Status is where the accepted message id stands, or ErrNotFound.
func (s *Store) Status(ctx context.Context, id string) (InboundStatus, error) {
	var status string
	err := s.db.Read().QueryRowContext(ctx, "SELECT status FROM inbound WHERE id = $1", id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("inbound %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read inbound %s: %w", id, err)
	}
	return InboundStatus(status), nil
}

// InboundRecord is where an accepted platform message stands.
type InboundRecord struct {
	ID        string // the gateway's id: also its user message's id in its session
	Status    InboundStatus
	SessionID string // "" until its turn opened the session
	Error     string // why it failed, or was marked
}

// InboundOf is the record of the message a channel gave the id messageID
// in chat, or ErrNotFound: for a producer that waits for its message's
// outcome wherever the turn ran.
func (s *Store) InboundOf(ctx context.Context, adapter adapters.ID, chatID, messageID string) (InboundRecord, error) {
	var r InboundRecord
	var status string
	err := s.db.Read().QueryRowContext(ctx, inboundOfQuery, string(adapter), chatID, messageID).Scan(&r.ID, &status, &r.SessionID, &r.Error)
	if errors.Is(err, sql.ErrNoRows) {
		return InboundRecord{}, fmt.Errorf("inbound %s/%s/%s: %w", adapter, chatID, messageID, ErrNotFound)
	}
	if err != nil {
		return InboundRecord{}, fmt.Errorf("read inbound %s/%s/%s: %w", adapter, chatID, messageID, err)
	}
	r.Status = InboundStatus(status)
	return r, nil
}

// queueReplies writes replies to the outbox inside a transaction.
func (s *Store) queueReplies(ctx context.Context, q dbutil.Querier, now time.Time, replies []Reply) error {
	origin := s.owner
	for _, r := range replies {
		if r.InboundID == "" {
			// A note, from now on (or a reply whose transaction fails,
			// which costs RecentNotes a read). Before the insert, so a
			// RecentNotes that found no note before it commits doesn't
			// record that there are none.
			s.notes.Store(notesSome)
		}
		u, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("generate id: %w", err)
		}
		_, err = q.ExecContext(ctx, queueReplyQuery, u.String(), r.Key, nullable(r.SessionID), nullable(r.InboundID),
			string(r.Adapter), r.ChatID, r.ReplyTo, r.Text, dbutil.Millis(now), r.EditMessageID, origin, r.FileSession, r.FileName, b2i(r.Speak))
		if err != nil {
			return fmt.Errorf("queue reply %s: %w", r.Key, err)
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// DueReplies lists pending replies whose next attempt is due: at most one
// per chat, the chat's oldest.
func (s *Store) DueReplies(ctx context.Context, limit int) ([]Reply, error) {
	var out []Reply
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		var err error
		out, err = scanReplies(q.QueryContext(ctx, dueRepliesQuery, dbutil.Millis(s.now()), limit))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list due replies: %w", err)
	}
	return out, nil
}

// NextDue is when the next pending reply may be claimed; ok is false when
// none is pending.
func (s *Store) NextDue(ctx context.Context) (at time.Time, ok bool, err error) {
	var due sql.NullInt64
	if err := s.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(ctx, nextDueQuery).Scan(&due)
	}); err != nil {
		return time.Time{}, false, fmt.Errorf("read when the next reply is due: %w", err)
	}
	if !due.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(due.Int64), true, nil
}

func scanReplies(rows *sql.Rows, err error) ([]Reply, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Reply
	for rows.Next() {
		var r Reply
		var adapter string
		var speak int
		if err := rows.Scan(&r.ID, &r.Key, &r.SessionID, &r.InboundID, &adapter, &r.ChatID, &r.ReplyTo, &r.Text, &r.Attempts, &r.EditMessageID,
			&r.FileSession, &r.FileName, &speak); err != nil {
			return nil, err
		}
		r.Speak = speak != 0
		r.Adapter = adapters.ID(adapter)
		out = append(out, r)
	}
	return out, rows.Err()
}

// ClaimDue takes the replies due now for sending, at most one per chat (the
// chat's oldest), and leases each for lease, so no other sender, on this
// replica or another, takes it meanwhile; the claim counts an attempt. One
// transaction claims the whole pass. If the sender dies, the lease lapses
// and the reply is due again.
func (s *Store) ClaimDue(ctx context.Context, limit int, lease time.Duration) ([]Reply, error) {
	return s.claimDue(ctx, limit, lease, true)
}

// claimDue is ClaimDue; look reads first whether anything is due, which
// spares an idle outbox a write but costs a read when something is.
func (s *Store) claimDue(ctx context.Context, limit int, lease time.Duration, look bool) ([]Reply, error) {
	now := s.now()
	// Look first: an idle outbox then costs a read, not a write.
	if look {
		if due, err := s.DueReplies(ctx, 1); err != nil || len(due) == 0 {
			return nil, err
		}
	}
	var claimed []Reply
	err := s.db.Tx(ctx, func(q dbutil.Querier) error {
		var err error
		args := []any{dbutil.Millis(now), dbutil.Millis(now.Add(lease)), s.owner, s.instance}
		query := claimDueSQL(s.db.Dialect, limit, s.channels != nil)
		if s.channels != nil {
			held, own := s.channels()
			args = append(args, held, own)
		}
		claimed, err = scanReplies(q.QueryContext(ctx, query, args...))
		if err != nil {
			return fmt.Errorf("claim due replies: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(claimed, func(a, b Reply) int { return strings.Compare(a.ID, b.ID) })
	return claimed, nil
}

// claimDueSQL is claimDueQuery for a dialect and limit: one statement
// text, and one prepared statement, per limit in use (the sender uses one).
func claimDueSQL(d dbutil.Dialect, limit int, perChannel bool) string {
	lock := ""
	if d == dbutil.Postgres {
		lock = claimDueLock
	}
	if perChannel && lock != "" {
		return fmt.Sprintf(claimDueQuery, claimDueChannels, limit, lock)
	}
	if limit == claimDueLimit {
		return claimDueDefault[lock != ""]
	}
	return fmt.Sprintf(claimDueQuery, "", limit, lock)
}

// claimDueLimit is the sender's pass size, whose text is built once.
const claimDueLimit = 256

// claimDueDefault is the claim at claimDueLimit, without and with the lock.
var claimDueDefault = map[bool]string{
	false: fmt.Sprintf(claimDueQuery, "", claimDueLimit, ""),
	true:  fmt.Sprintf(claimDueQuery, "", claimDueLimit, claimDueLock),
}

// Reclaim takes back the replies an earlier run of this process claimed
// and never recorded (it crashed mid-send), so they are due again now
// rather than when that claim would have lapsed; their backoff is kept.
// Each may have reached its chat before the crash, so it may be seen
// twice: n counts them.
//
// Among replicas (Cluster) it takes back the replies of replicas fenced
// as dead, whose claims would otherwise hold their chats until they
// lapse; on PostgreSQL without it, it takes nothing.
func (s *Store) Reclaim(ctx context.Context) (n int, err error) {
	query, arg := reclaimQuery, s.instance
	switch {
	case s.cluster:
		query, arg = reclaimDeadQuery, s.owner
	case s.Shared():
		return 0, nil
	}
	res, err := s.db.Write().ExecContext(ctx, query, dbutil.Millis(s.now()), arg)
	if err != nil {
		return 0, fmt.Errorf("take back the replies a crash left claimed: %w", err)
	}
	rows, _ := res.RowsAffected()
	return int(rows), nil
}

// ReclaimOwn takes back the replies this store's sender claimed and has
// not recorded: call it only with none of its sends in flight. The
// replies are due again now, their backoff kept.
func (s *Store) ReclaimOwn(ctx context.Context) (int, error) {
	res, err := s.db.Write().ExecContext(ctx, reclaimOwnQuery, dbutil.Millis(s.now()), s.instance)
	if err != nil {
		return 0, fmt.Errorf("take back this sender's unrecorded claims: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// MarkSent records that the platform took the reply.
func (s *Store) MarkSent(ctx context.Context, id, platformMessageID string) error {
	_, err := s.db.Write().ExecContext(ctx, markSentQuery, id, platformMessageID, dbutil.Millis(s.now()))
	if err != nil {
		return fmt.Errorf("mark reply %s sent: %w", id, err)
	}
	return nil
}

// MarkRetry records a failed attempt: the reply is tried again at next, or
// given up (status failed) when giveUp is set. A reply sent meanwhile (by
// another sender, once this one's lease lapsed) stays sent.
func (s *Store) MarkRetry(ctx context.Context, id string, cause error, next time.Time, giveUp bool) error {
	status := "pending"
	if giveUp {
		status = "failed"
	}
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	_, err := s.db.Write().ExecContext(ctx, markRetryQuery, id, status, msg, dbutil.Millis(next), "pending")
	if err != nil {
		return fmt.Errorf("record failed attempt of reply %s: %w", id, err)
	}
	return nil
}

// ErrNotFound means no record has that id.
var ErrNotFound = errors.New("not found")

// NoteDelivery is how the notes queued under some keys went out: each
// note's chunks are outbox rows keyed "<key>:0", "<key>:1", ...
type NoteDelivery struct {
	// Notes is how many of the keys have a note queued; Sent, Pending and
	// Failed count those all sent, still being tried, and given up.
	Notes, Sent, Pending, Failed int
	// Attempts is the most any chunk has been tried; LastError is the
	// newest error of a chunk not sent.
	Attempts  int
	LastError string
}

// NoteDeliveries reports the delivery of the notes queued under keys (a
// cron run's, one per target), from the outbox rows that carry them.
func (s *Store) NoteDeliveries(ctx context.Context, keys []string) (NoteDelivery, error) {
	var d NoteDelivery
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		for _, key := range keys {
			var chunks, sent, failed int
			for i := 0; ; i++ {
				var status, lastErr string
				var attempts int
				err := q.QueryRowContext(ctx, noteChunkQuery, fmt.Sprintf("%s:%d", key, i)).Scan(&status, &attempts, &lastErr)
				if errors.Is(err, sql.ErrNoRows) {
					break
				}
				if err != nil {
					return err
				}
				chunks++
				d.Attempts = max(d.Attempts, attempts)
				switch status {
				case "sent":
					sent++
				case "failed":
					failed++
				}
				if status != "sent" && lastErr != "" {
					d.LastError = lastErr
				}
			}
			switch {
			case chunks == 0:
				continue
			case failed > 0:
				d.Failed++
			case sent == chunks:
				d.Sent++
			default:
				d.Pending++
			}
			d.Notes++
		}
		return nil
	})
	if err != nil {
		return NoteDelivery{}, fmt.Errorf("read the delivery of notes: %w", err)
	}
	return d, nil
}
