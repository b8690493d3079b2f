package sessions

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/parleyd/parley/dbutil"
)

// DefaultActiveCache is how many conversations' active sessions a store
// remembers by default (see WithActiveCache).
const DefaultActiveCache = 4096

// sessionRevisionQuery checks a remembered session against the database.
const sessionRevisionQuery = `SELECT revision, status FROM sessions WHERE id = $1`

// activeRevisionQuery is activeSessionQuery with the row's revision.
const activeRevisionQuery = `SELECT ` + sessionColumns + `, revision FROM sessions
	WHERE surface = $1 AND surface_id = $2 AND agent_id = $3 AND user_id = $4 AND workspace_id = $5
	AND status = 'active'`

// WithActiveCache sets how many conversations' active sessions the store
// remembers (0 turns this off). Every turn resolves its conversation's
// session; with the cache, that reads two columns of the session's row (its
// revision and status) instead of all of them. Every change to a session
// bumps its revision, whichever process or replica makes it, so a session
// changed elsewhere is read again in full.
func WithActiveCache(n int) Option {
	return func(s *SQLStore) {
		s.actives = nil
		if n > 0 {
			s.actives = newActiveCache(n)
		}
	}
}

// WithSoleWriter says that this store is the one its process writes
// sessions through. On a SQLite file the process holds
// (dbutil.DB.HoldsFile), it then makes every change to them, and resolves
// a remembered active session with no read at all, instead of a read of
// its revision. Anywhere else (PostgreSQL, which replicas share, or a file
// another process may write) it reads the revision as before.
func WithSoleWriter() Option {
	return func(s *SQLStore) { s.soleWriter = true }
}

// activeCache remembers, per key, the active session a store last read,
// with the revision it had then, and keeps it up to date with the store's
// own appends.
type activeCache struct {
	mu    sync.Mutex
	max   int
	byKey map[Key]*activeEntry
	byID  map[ID]*activeEntry
	// newer holds the revision this store's appends took sessions with no
	// copy to, so that a read that began before such an append can't put
	// the older state it saw (see put); it is cleared when it grows past
	// max entries.
	newer map[ID]int64

	hits, misses atomic.Int64
}

type activeEntry struct {
	s   Session
	rev int64
}

func newActiveCache(n int) *activeCache {
	return &activeCache{max: n, byKey: map[Key]*activeEntry{}, byID: map[ID]*activeEntry{}, newer: map[ID]int64{}}
}

// get returns key's remembered session and the revision it is at.
func (c *activeCache) get(key Key) (Session, int64, bool) {
	if c == nil {
		return Session{}, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return Session{}, 0, false
	}
	return e.s, e.rev, true
}

// put remembers s, read at revision rev.
func (c *activeCache) put(s Session, rev int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.newer[s.ID]; ok {
		delete(c.newer, s.ID)
		if r > rev {
			return // read before an append of ours: already old
		}
	}
	if old, ok := c.byKey[s.Key]; ok {
		delete(c.byID, old.s.ID)
	} else if len(c.byKey) >= c.max {
		for k, e := range c.byKey { // any one: a map's order is random enough
			delete(c.byKey, k)
			delete(c.byID, e.s.ID)
			break
		}
	}
	if old, ok := c.byID[s.ID]; ok { // the same session under a key it left
		delete(c.byKey, old.s.Key)
	}
	e := &activeEntry{s: s, rev: rev}
	c.byKey[s.Key], c.byID[s.ID] = e, e
}

// forget drops session id.
func (c *activeCache) forget(id ID) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		delete(c.byID, id)
		delete(c.byKey, e.s.Key)
	}
}

// forgetChildren drops the sessions branched from parent, whose parent_id
// its deletion clears.
func (c *activeCache) forgetChildren(parent ID) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.byID {
		if e.s.ParentID == parent {
			delete(c.byID, id)
			delete(c.byKey, e.s.Key)
		}
	}
}

// appended brings session id's copy up to an append of this store, which
// left the row at stamp at having added tokens and usage u. A copy at any
// other revision than the one just before is dropped: something else
// changed the session meanwhile.
func (c *activeCache) appended(id ID, at stamp, tokens int64, u Usage) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		if len(c.newer) >= c.max {
			clear(c.newer)
		}
		c.newer[id] = at.revision
		return
	}
	if e.rev != at.revision-1 || e.s.Rollup.TokenCount+tokens != at.tokens {
		delete(c.byID, id)
		delete(c.byKey, e.s.Key)
		return
	}
	s := &e.s
	e.rev = at.revision
	s.LastSeq, s.MessageCount, s.Rollup.TokenCount = at.lastSeq, at.count, at.tokens
	s.LastActiveAt, s.UpdatedAt = dbutil.Time(at.updated), dbutil.Time(at.updated)
	s.Rollup.PromptTokens += u.Input
	s.Rollup.CompletionTokens += u.Output
	s.Rollup.ReasoningTokens += u.Reasoning
	s.Rollup.CacheRead += u.CacheRead
	s.Rollup.CacheWrite += u.CacheWrite
	s.Rollup.CostUSD += u.CostUSD
}

// tokens is the token count of session id's remembered copy, which the
// store's own appends keep current.
func (c *activeCache) tokens(id ID) (int64, bool) {
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		return e.s.Rollup.TokenCount, true
	}
	return 0, false
}

// cachedActive is key's active session from the cache, if the database
// still holds it as it was remembered: one read of its revision and status.
func (s *SQLStore) cachedActive(ctx context.Context, key Key) (Session, bool) {
	sess, rev, ok := s.actives.get(key)
	if !ok {
		return Session{}, false
	}
	if s.soleWriter && s.db.Mark() != dbutil.NoMark {
		// Every change to the session is this store's, and each one
		// brought the copy up to date or dropped it: no read.
		s.actives.hits.Add(1)
		sess.Metadata = append([]byte(nil), sess.Metadata...)
		return sess, true
	}
	var dbRev int64
	var status Status
	err := s.db.View(ctx, func(q dbutil.Querier) error {
		return q.QueryRowContext(s.db.Brief(ctx), sessionRevisionQuery, sess.ID).Scan(&dbRev, &status)
	})
	if err != nil || dbRev != rev || status != StatusActive {
		// Gone, changed or archived elsewhere (or the read failed, which
		// the full read reports).
		s.actives.forget(sess.ID)
		s.actives.misses.Add(1)
		return Session{}, false
	}
	s.actives.hits.Add(1)
	sess.Metadata = append([]byte(nil), sess.Metadata...) // the caller's to keep
	return sess, true
}

// activeAt reads key's active session in full, with its revision.
func activeAt(ctx context.Context, q dbutil.Querier, key Key) (Session, int64, error) {
	var rev int64
	s, err := scanSession(withExtra{q.QueryRowContext(ctx, activeRevisionQuery, keyArgs(key)...), []any{&rev}})
	return s, rev, err
}

// withExtra scans a row's last columns into extra, after scanSession's.
type withExtra struct {
	r     dbutil.Scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.r.Scan(append(dest, w.extra...)...) }

// ActiveCacheStats is how often Resolve found a conversation's session in
// the cache still as the database holds it, and how often it read it.
func (s *SQLStore) ActiveCacheStats() (hits, misses int64) {
	if s.actives == nil {
		return 0, 0
	}
	return s.actives.hits.Load(), s.actives.misses.Load()
}
