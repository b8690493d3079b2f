package sessions

import (
	"container/list"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/parleyd/parley/dbutil"
)

// DefaultHistoryCache is how many bytes of recent history a store keeps in
// memory by default (see WithHistoryCache): about a thousand conversations'
// last ten turns, so that many in flight find their history in memory
// rather than reading it beside the single SQLite writer, which slows it.
// A daemon that settles after a busy spell releases the cache.
const DefaultHistoryCache = 8 << 20

// stampColumns are the session columns that together say whether its live
// context changed: revision counts every change the store makes, and the
// others also move with a change made by anything else.
const stampColumns = `revision, last_seq, message_count, token_count, updated_at`

const sessionStampQuery = `SELECT ` + stampColumns + ` FROM sessions WHERE id = $1`

// stamp is one state of a session's live context.
type stamp struct {
	revision, lastSeq, count, tokens, updated int64
}

func scanStamp(r dbutil.Scanner) (stamp, error) {
	var st stamp
	err := r.Scan(&st.revision, &st.lastSeq, &st.count, &st.tokens, &st.updated)
	return st, err
}

// follows reports whether next is st with exactly one message appended.
func (st stamp) follows(next stamp) bool {
	return next.revision == st.revision+1 && next.lastSeq == st.lastSeq+1 && next.count == st.count+1
}

// WithHistoryCache sets how many bytes of recent history the store keeps in
// memory (0 turns the cache off). A turn reads the same recent messages its
// session's last turn read, plus the two or three that turn appended; with
// the cache, it reads one row of the session instead, which says whether the
// copy is still the database's. Anything that changes the live context
// changes that row, whichever process or replica made the change.
func WithHistoryCache(bytes int) Option {
	return func(s *SQLStore) {
		s.history = nil
		if bytes > 0 {
			s.history = newHistoryCache(bytes)
		}
	}
}

// historyCache keeps, per session, the last result of one kind of live
// context read (the whole live context, or its last N turns), with the
// stamp it was read at, least recently used first out.
type historyCache struct {
	mu      sync.Mutex
	budget  int
	size    int
	entries map[ID]*list.Element
	lru     list.List // of *historyEntry, most recent at the front
	// seen holds the sessions read lately that have no entry, in order, a
	// ring whose oldest is at next: a session's history is kept from its
	// second read on, so a conversation of one turn, or a crowd of
	// sessions each read once in a long while, costs the cache nothing.
	seen  map[ID]struct{}
	order []ID
	next  int

	hits, misses atomic.Int64
	// unkept counts the reads whose result was not kept: a session's
	// first read lately, which admit only notes.
	unkept atomic.Int64
}

type historyEntry struct {
	id    ID
	turns int // 0: the whole live context; otherwise readRecent's window
	at    stamp
	msgs  []Message
	size  int
	// byAppend is the message whose append through this store last
	// brought the entry up to date (its commit showed the entry was the
	// session's state just before), until a read is served from it.
	byAppend MessageID
}

// seenLimit is how many sessions read once the cache remembers: as many
// conversations as the active-session cache, so a session's second read
// still finds its first however many conversations take turns between
// them (at 256, with 300 conversations in turn, none was ever admitted and
// every turn read its history).
const seenLimit = DefaultActiveCache

func newHistoryCache(budget int) *historyCache {
	return &historyCache{budget: budget, entries: make(map[ID]*list.Element), seen: make(map[ID]struct{})}
}

// admit reports whether id's next read is worth keeping: it has an entry,
// or it was read lately. Otherwise it notes the read.
func (c *historyCache) admit(id ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[id]; ok {
		return true
	}
	if _, ok := c.seen[id]; ok {
		return true
	}
	if len(c.order) < seenLimit {
		c.order = append(c.order, id)
	} else {
		delete(c.seen, c.order[c.next])
		c.order[c.next] = id
		c.next = (c.next + 1) % seenLimit
	}
	c.seen[id] = struct{}{}
	return false
}

// anyTurns is the kind of an entry seeded for a session the store has just
// created (see seed): it holds the whole live context, so it answers a
// read of any kind, and takes the kind of the first.
const anyTurns = -1

// seed records that session id, which this store has just created, has an
// empty live context at stamp at: its first turns' reads then come from
// the copy its appends keep, with no read of its history at all.
func (c *historyCache) seed(id ID, at stamp) {
	if c == nil {
		return
	}
	e := &historyEntry{id: id, turns: anyTurns, at: at, size: entrySize(nil)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(id)
	c.entries[id] = c.lru.PushFront(e)
	c.size += e.size
	c.evict()
}

// get returns a copy of id's cached read of kind turns, if it was read at at.
func (c *historyCache) get(id ID, turns int, at stamp) ([]Message, bool) {
	return c.serve(id, turns, at, "")
}

// afterAppend returns id's cached read of kind turns if this store's
// append of message mid was the last to bring it up to date, and no read
// has been served from it since.
func (c *historyCache) afterAppend(id ID, turns int, mid MessageID) ([]Message, bool) {
	return c.serve(id, turns, stamp{}, mid)
}

// serve returns id's cached read of kind turns if it was read at at or,
// with mid set, if the append of mid was the last to bring it up to date.
// Either way the entry no longer answers a read after that append.
func (c *historyCache) serve(id ID, turns int, at stamp, mid MessageID) ([]Message, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[id]
	if !ok {
		return nil, false
	}
	e := el.Value.(*historyEntry)
	if e.turns == anyTurns {
		e.turns = turns
	}
	if e.turns != turns || (mid == "" && e.at != at) || (mid != "" && e.byAppend != mid) {
		return nil, false
	}
	e.byAppend = ""
	c.lru.MoveToFront(el)
	return e.read(), true
}

// unmark forgets which append last brought id's entry up to date.
func (c *historyCache) unmark(id ID) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[id]; ok {
		el.Value.(*historyEntry).byAppend = ""
	}
}

// read is what the entry's kind of read returns. It is shared, not copied,
// unless a summary must be put before the window: the cache never changes a
// message it holds, and the length cap keeps a caller's append from
// writing into the array the cache appends to.
func (e *historyEntry) read() []Message {
	msgs := e.msgs[:len(e.msgs):len(e.msgs)]
	if e.turns <= 0 {
		return msgs
	}
	start := windowStart(msgs, e.turns)
	if start == 0 {
		return msgs
	}
	if msgs[0].Summary {
		return append(msgs[:1:1], msgs[start:]...)
	}
	return msgs[start:]
}

// put records what a read of kind turns returned at stamp at. A read that
// holds a message newer than the stamp raced an append, and is not kept:
// that append would otherwise be added to it twice.
func (c *historyCache) put(id ID, turns int, at stamp, msgs []Message) {
	for _, m := range msgs {
		if m.Seq > at.lastSeq {
			c.drop(id)
			return
		}
	}
	e := &historyEntry{id: id, turns: turns, at: at, msgs: slices.Clone(msgs)}
	e.size = entrySize(e.msgs)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(id)
	if e.size > c.budget {
		return
	}
	c.entries[id] = c.lru.PushFront(e)
	c.size += e.size
	c.evict()
}

// appended adds m, which this store just appended and which took the
// session to stamp at, to id's cached read, if that read was of the state
// just before. Otherwise something else changed the session in between,
// and the entry is dropped.
func (c *historyCache) appended(id ID, m Message, at stamp) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[id]
	if !ok {
		return
	}
	e := el.Value.(*historyEntry)
	if !e.at.follows(at) || m.Seq != at.lastSeq {
		c.remove(id)
		return
	}
	e.at, e.byAppend = at, m.ID
	if m.HiddenAt.IsZero() {
		// The caller keeps its own message; the cache holds a copy.
		m.Parts, m.ToolCalls = slices.Clone(m.Parts), slices.Clone(m.ToolCalls)
		if m.Usage != nil {
			u := *m.Usage
			m.Usage = &u
		}
		grown := cap(e.msgs)
		e.msgs = append(e.msgs, m)
		grown = cap(e.msgs) - grown
		c.size -= e.size
		// The messages before the window stay until they are half the
		// entry, then go in one copy: not a copy per append. Otherwise the
		// size grows by m's, not by sizing every message again.
		if e.turns > 0 && 2*windowStart(e.msgs, e.turns) > len(e.msgs) {
			e.msgs = recentWindow(e.msgs, e.turns)
			e.size = entrySize(e.msgs)
		} else {
			e.size += grown*perMessage + messageSize(m)
		}
		c.size += e.size
	}
	c.lru.MoveToFront(el)
	c.evict()
}

// tokens is the token count of the stamp id's history was cached at.
func (c *historyCache) tokens(id ID) (int64, bool) {
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[id]
	if !ok {
		return 0, false
	}
	return el.Value.(*historyEntry).at.tokens, true
}

// clear forgets every cached history and every session read lately.
func (c *historyCache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.lru.Init()
	c.size = 0
	clear(c.seen)
	c.order, c.next = nil, 0
}

// CachedHistories is how many sessions' recent history the store keeps in
// memory.
func (s *SQLStore) CachedHistories() int {
	if s.history == nil {
		return 0
	}
	s.history.mu.Lock()
	defer s.history.mu.Unlock()
	return len(s.history.entries)
}

// HistoryCacheStats is how many reads of a live context the store answered
// from its history cache (hits) and how many read the messages from the
// database (misses). Misses that climb with hits flat mean the cache holds
// fewer conversations than take turns: see WithHistoryCache.
func (s *SQLStore) HistoryCacheStats() (hits, misses int64) {
	if s.history == nil {
		return 0, s.uncachedReads.Load()
	}
	return s.history.hits.Load(), s.history.misses.Load() + s.history.unkept.Load()
}

// ReleaseCaches forgets the recent histories the store keeps: a daemon
// gone quiet after a busy spell then holds no copy of conversations that
// may not speak again for hours. A session's next turn reads its history
// from the database, and it is kept again from the read after.
func (s *SQLStore) ReleaseCaches() { s.history.clear() }

// drop forgets id's cached history.
func (c *historyCache) drop(id ID) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.remove(id)
	c.mu.Unlock()
}

func (c *historyCache) remove(id ID) {
	if el, ok := c.entries[id]; ok {
		c.size -= el.Value.(*historyEntry).size
		c.lru.Remove(el)
		delete(c.entries, id)
	}
}

func (c *historyCache) evict() {
	for c.size > c.budget {
		el := c.lru.Back()
		if el == nil {
			return
		}
		c.remove(el.Value.(*historyEntry).id)
	}
}

const (
	perEntry   = 160 // an entry, its list element and map slot
	perMessage = 320 // a message's struct, its strings' headers, a time, a slice header
)

// entrySize estimates the memory an entry holding msgs takes.
func entrySize(msgs []Message) int {
	n := perEntry + cap(msgs)*perMessage
	for _, m := range msgs {
		n += messageSize(m)
	}
	return n
}

// messageSize estimates what m holds beyond its struct.
func messageSize(m Message) int {
	n := len(m.ID) + len(m.SessionID) + len(m.Content) + len(m.ToolCallID) + len(m.Model) + len(m.CompactionID)
	for _, p := range m.Parts {
		n += 96 + len(p.Type) + len(p.Text) + len(p.MediaType) + len(p.URL) + len(p.Name) + len(p.Data)
	}
	for _, tc := range m.ToolCalls {
		n += 64 + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	if m.Usage != nil {
		n += 64
	}
	return n
}

// recentWindow is what readRecent returns for a live context that msgs
// ends, as long as msgs holds at least that much of it: the messages from
// the turns-th last user message on, after the summary, if the live
// context starts with one.
func recentWindow(msgs []Message, turns int) []Message {
	start := windowStart(msgs, turns)
	if start == 0 {
		return msgs
	}
	if msgs[0].Summary {
		return append(msgs[:1:1], msgs[start:]...)
	}
	return slices.Clone(msgs[start:])
}

// windowStart is the index of the turns-th last user message of msgs, or
// 0 when there are fewer.
func windowStart(msgs []Message, turns int) int {
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			if seen++; seen == turns {
				return i
			}
		}
	}
	return 0
}

// readLive reads the live context (opts.Turns as readMessages takes it)
// through the cache: one read of the session's stamp, and the messages
// themselves only when the cached copy is not of that stamp.
func (s *SQLStore) readLive(ctx context.Context, r dbutil.Querier, id ID, turns int) ([]Message, error) {
	if !s.history.admit(id) {
		s.history.unkept.Add(1)
		return readMessages(ctx, r, id, MessagesOptions{Turns: turns})
	}
	at, err := scanStamp(r.QueryRowContext(s.db.Brief(ctx), sessionStampQuery, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	if msgs, ok := s.history.get(id, turns, at); ok {
		s.history.hits.Add(1)
		return msgs, nil
	}
	s.history.misses.Add(1)
	msgs, err := readMessages(ctx, r, id, MessagesOptions{Turns: turns})
	if err != nil {
		return nil, err
	}
	s.history.put(id, turns, at, msgs)
	return msgs, nil
}

const tokenCountQuery = `SELECT token_count FROM sessions WHERE id = $1`

// TokenCount returns the session's token_count rollup. A session whose
// history or active session the store caches answers from the cache,
// which this store's own appends keep current, without a read; a change another process made since
// shows at the next read of the history.
func (s *SQLStore) TokenCount(ctx context.Context, id ID) (int64, error) {
	if n, ok := s.history.tokens(id); ok {
		return n, nil
	}
	if n, ok := s.actives.tokens(id); ok {
		return n, nil
	}
	var n int64
	err := s.db.View(ctx, func(r dbutil.Querier) error {
		return r.QueryRowContext(ctx, tokenCountQuery, id).Scan(&n)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("read session %s: %w", id, err)
	}
	return n, nil
}
