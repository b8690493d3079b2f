// Package cluster lets several parley replicas share one PostgreSQL
// database, with PostgreSQL itself as the coordination engine: a row per
// replica renewed by a heartbeat, holds (a session's lane, a channel) that
// one live replica has at a time, fencing of a replica whose heartbeat
// lapsed, and notifications that hand a message to the replica holding its
// session. There is no consensus of parley's own.
//
// A replica is fenced by a survivor once its heartbeat is older than the
// lease: the survivor sets fenced_at under an advisory lock that every
// write transaction of the fenced replica holds shared (parley_fence), so
// a transaction either committed before the fence or is refused after it;
// one still open a second into the fence (the process paused inside it)
// is ended with pg_terminate_backend, so a paused process never holds its
// fence off.
// Its holds are then free, and its unanswered messages are taken over in
// the order it would have run them. A fenced replica that wakes up (a
// stopped process continued, a VM thawed) finds its heartbeat refused and
// stops; it writes nothing in between.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/parleyd/parley/dbutil"
)

// Defaults: a survivor takes a dead replica's work over within
// DefaultLease + DefaultHeartbeat of its last heartbeat.
const (
	DefaultLease     = 5 * time.Second
	DefaultHeartbeat = time.Second
)

// EnvHost, when set, is the host name a replica reports instead of the
// system's: replicas that report one host and whose process is gone there
// are fenced at once, so processes that share a host name but not a
// process table (containers on several machines with one hostname) need
// distinct ones.
const EnvHost = "PARLEY_REPLICA_HOST"

// ErrFenced means this replica's lease lapsed and a survivor took its work
// over: it must stop, and start again as a new replica.
var ErrFenced = errors.New("this replica's lease lapsed and another replica took its work over (was the process paused, or the database out of reach, for longer than gateway.replica_lease?); it stops now and writes nothing more; start it again (a supervisor such as systemd's Restart=on-failure does)")

// dbNow is the database's clock in milliseconds: every replica's liveness
// is judged on one clock.
const dbNow = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT`

const (
	insertReplicaQuery = `INSERT INTO replicas (instance, name, host, pid, version, api_url, hop_key, started_at, heartbeat_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, ` + dbNow + `, ` + dbNow + `)`

	hopKeyQuery = `SELECT hop_key FROM replicas WHERE instance = $1 AND fenced_at IS NULL`

	heartbeatQuery = `UPDATE replicas SET heartbeat_at = ` + dbNow + `, adapters = $2, channels = $3, lanes = $4, queued = $5
	WHERE instance = $1 AND fenced_at IS NULL`

	// The live replicas of a name, with how old their heartbeat is.
	sameNameQuery = `SELECT instance, host, pid, ` + dbNow + ` - heartbeat_at, api_url FROM replicas WHERE name = $1 AND fenced_at IS NULL`

	// Replicas on this host whose process is gone (restarted), and those
	// whose heartbeat is older than the lease.
	staleQuery = `SELECT instance, host, pid, ` + dbNow + ` - heartbeat_at, api_url FROM replicas WHERE fenced_at IS NULL AND instance <> $1`

	fenceLockQuery = `SELECT pg_advisory_xact_lock(1885434465, hashtext($1))`
	fenceQuery     = `UPDATE replicas SET fenced_at = ` + dbNow + ` WHERE instance = $1 AND fenced_at IS NULL`
	leaveQuery     = `UPDATE replicas SET fenced_at = ` + dbNow + `, recovered = TRUE WHERE instance = $1`
	dropHoldsQuery = `DELETE FROM holds WHERE instance = $1`
	releaseQuery   = `DELETE FROM holds WHERE name = $1 AND instance = $2`
	forgetQuery    = `DELETE FROM replicas WHERE fenced_at IS NOT NULL AND fenced_at < ` + dbNow + ` - $1
	AND NOT EXISTS (SELECT 1 FROM inbound WHERE owner = replicas.instance AND status = 'accepted')`

	// A hold is this replica's if nobody has it or its holder is fenced
	// (or gone); otherwise the holder is returned. A session's lane held
	// by a fenced replica stays its until its unanswered messages are
	// taken over (the takeover passes the lane to the replica that took
	// them, gateway.Store.Unfinished): a newer message of the session
	// never runs before the ones the dead replica had accepted.
	claimHoldQuery = `INSERT INTO holds (name, instance, since) VALUES ($1, $2, ` + dbNow + `)
	ON CONFLICT (name) DO UPDATE SET instance = EXCLUDED.instance, since = EXCLUDED.since
	WHERE holds.instance <> EXCLUDED.instance
	AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.instance = holds.instance AND (r.fenced_at IS NULL
		OR (holds.name LIKE 'lane:%' AND EXISTS (SELECT 1 FROM inbound i WHERE i.owner = r.instance AND i.status = 'accepted'))))
	RETURNING instance`
	holderQuery = `SELECT instance FROM holds WHERE name = $1`

	liveHolderQuery = `SELECT h.instance FROM holds h JOIN replicas r ON r.instance = h.instance
	WHERE h.name = $1 AND r.fenced_at IS NULL`

	liveQuery = `SELECT instance, name, host, pid, version, api_url, started_at, heartbeat_at, ` + dbNow + ` - heartbeat_at,
	adapters, channels, lanes, queued FROM replicas WHERE fenced_at IS NULL ORDER BY started_at, instance`

	apiURLQuery = `SELECT api_url, ` + dbNow + ` - heartbeat_at FROM replicas WHERE instance = $1 AND fenced_at IS NULL`
)

// Options configure a Member.
type Options struct {
	// Name is the replica's name: config gateway.replica_id, or the host
	// name. Explicit says the operator set it: then no two live processes
	// may share it.
	Name     string
	Explicit bool
	// Lease is how long a replica stays live without a heartbeat;
	// Heartbeat is how often it renews. Defaults above.
	Lease, Heartbeat time.Duration
	// APIURL is where other replicas reach this one's HTTP API ("" if it
	// serves none); Version is the build's.
	APIURL, Version string
	// Stats, if set, reports what the replica is doing, for `parley replicas`.
	Stats func() Stats
	Log   *slog.Logger
}

// Stats is a replica's load and what it runs.
type Stats struct {
	Adapters []string // the channels configured
	Channels []string // the channels it holds and runs
	Lanes    int      // sessions with work
	Queued   int      // messages waiting in its lanes
}

// Member is this process among the replicas sharing the database.
type Member struct {
	db   *dbutil.DB
	opts Options
	id   string
	host string
	pid  int

	// beat is when the last successful heartbeat was sent, on the
	// monotonic clock (a time.Time kept for its monotonic reading).
	beat atomic.Pointer[time.Time]
	// steady is since when every heartbeat went through: after an outage
	// of the database, every replica's heartbeat is late, and none is
	// fenced until the others have had a lease to beat again.
	steady atomic.Pointer[time.Time]
	fenced atomic.Bool
	live   atomic.Int64 // live replicas at the last Reap, this one included
	// peers are the other replicas whose heartbeat was on time at the
	// last Reap, with their API's address.
	peers atomic.Pointer[map[string]string]
	dead  chan struct{} // closed once fenced
	once  sync.Once

	mu    sync.Mutex
	holds map[string]bool // the holds this replica has
	// routes are the holders of others' holds that requests went to:
	// a hold stays with its holder until the holder is fenced or leaves,
	// so a route is good while the holder is among the peers.
	routes map[string]string

	// hopKey signs the API requests this replica passes to another
	// (SignHop); hopKeys are the others', as read (VerifyHop).
	hopKey  string
	hopMu   sync.Mutex
	hopKeys map[string]string
}

// New names this process among the replicas: Name plus a random suffix,
// unique per process. Nothing is written until Join.
func New(db *dbutil.DB, opts Options) *Member {
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	if h := os.Getenv(EnvHost); h != "" {
		host = h
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	name := opts.Name
	if name == "" {
		name = host
	}
	opts.Name = name
	return &Member{db: db, opts: opts, id: name + "-" + hex.EncodeToString(suffix), host: host, pid: os.Getpid(),
		dead: make(chan struct{}), holds: map[string]bool{}, routes: map[string]string{}, hopKey: hex.EncodeToString(key)}
}

// SetAPIURL and SetVersion say, before Join, where this replica serves
// its API and which build it runs.
func (m *Member) SetAPIURL(u string)  { m.opts.APIURL = u }
func (m *Member) SetVersion(v string) { m.opts.Version = v }

// ID is this process's unique replica id.
func (m *Member) ID() string { return m.id }

// Fenced is closed once this replica has been fenced.
func (m *Member) Fenced() <-chan struct{} { return m.dead }

// Join registers this replica and guards the database's writes with its
// fence. Earlier processes of this host that are gone (a restart) are
// fenced at once, so their work is taken over now rather than after the
// lease. With an explicit name, a live process of that name refuses the
// join once it has shown itself live for a lease.
func (m *Member) Join(ctx context.Context) error {
	if err := m.fenceGoneHere(ctx); err != nil {
		return err
	}
	if m.opts.Explicit {
		if err := m.waitForName(ctx); err != nil {
			return err
		}
	}
	now := time.Now()
	_, err := m.db.Write().ExecContext(ctx, insertReplicaQuery, m.id, m.opts.Name, m.host, m.pid, m.opts.Version, m.opts.APIURL, m.hopKey)
	if err != nil {
		return fmt.Errorf("register replica %s: %w", m.id, err)
	}
	m.beat.Store(&now)
	// Steady from the start: a replica that just joined may fence at once.
	steady := now.Add(-m.opts.Lease - m.opts.Heartbeat)
	m.steady.Store(&steady)
	ours.Store(m.id, true)
	m.db.SetFence(fence{m})
	// Replicas that died while none ran are fenced now, so recovery
	// takes their messages at once.
	_, err = m.Reap(ctx)
	return err
}

// fenceGoneHere fences the replicas of this host whose process is gone.
func (m *Member) fenceGoneHere(ctx context.Context) error {
	others, err := m.others(ctx, staleQuery, m.id)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.host == m.host && !processAlive(o.id, o.pid) {
			if _, err := m.fence(ctx, o.id, "its process is gone (restarted)"); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitForName waits, up to a lease and a heartbeat, for the live
// replicas named like this one to prove themselves dead, fencing them;
// one that keeps its heartbeat up is another live process with the name.
func (m *Member) waitForName(ctx context.Context) error {
	deadline := time.Now().Add(m.opts.Lease + 2*m.opts.Heartbeat)
	for {
		others, err := m.others(ctx, sameNameQuery, m.opts.Name)
		if err != nil {
			return err
		}
		var live *other
		for _, o := range others {
			if o.age > m.opts.Lease.Milliseconds() {
				if _, err := m.fence(ctx, o.id, "its heartbeat lapsed"); err != nil {
					return err
				}
				continue
			}
			live = &o
		}
		if live == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another live replica (host %s, process %d) uses replica_id %q: give each replica its own gateway.replica_id, or leave it unset for a unique one", live.host, live.pid, m.opts.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(m.opts.Heartbeat):
		}
	}
}

type other struct {
	id, host string
	pid      int
	age      int64 // milliseconds since its heartbeat
	apiURL   string
}

func (m *Member) others(ctx context.Context, query string, arg any) ([]other, error) {
	out, err := dbutil.Query(ctx, m.db.Read(), query, func(s dbutil.Scanner) (other, error) {
		var o other
		err := s.Scan(&o.id, &o.host, &o.pid, &o.age, &o.apiURL)
		return o, err
	}, arg)
	if err != nil {
		return nil, fmt.Errorf("read the replicas: %w", err)
	}
	return out, nil
}

// ours are the replicas this process runs (tests run several).
var ours sync.Map

// processAlive reports whether the replica id's process, of this host,
// is running.
func processAlive(id string, pid int) bool {
	if pid == os.Getpid() {
		// This process's own pid: one of its replicas, or an earlier
		// process that had the pid (a container's pid 1, restarted).
		_, ok := ours.Load(id)
		return ok
	}
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Run renews the heartbeat and fences replicas whose heartbeat lapsed
// until ctx ends or this replica is fenced (ErrFenced). each runs after
// every heartbeat that went through, told whether this one fenced a
// replica (or some beats went by): the daemon takes work over then.
func (m *Member) Run(ctx context.Context, each func(ctx context.Context, takeOver bool)) error {
	t := time.NewTicker(m.opts.Heartbeat)
	defer t.Stop()
	for beat := 0; ; beat++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := m.Heartbeat(ctx); err != nil {
			if errors.Is(err, ErrFenced) {
				return err
			}
			m.steady.Store(nil)
			if ctx.Err() == nil {
				m.opts.Log.Warn("replica heartbeat failed; it is tried again each second", "error", err)
			}
			continue
		}
		if m.steady.Load() == nil {
			now := time.Now()
			m.steady.Store(&now)
		}
		fenced := 0
		if since := m.steady.Load(); time.Since(*since) < m.opts.Lease+m.opts.Heartbeat {
			// Just back from an outage: the others may be too. Look, but
			// fence nobody.
			if _, err := m.reap(ctx, false); err != nil && ctx.Err() == nil {
				m.opts.Log.Warn("look at the replicas", "error", err)
			}
		} else if n, err := m.Reap(ctx); err != nil && ctx.Err() == nil {
			m.opts.Log.Warn("look for replicas whose heartbeat lapsed", "error", err)
		} else {
			fenced = n
		}
		if beat%forgetEvery == forgetEvery-1 {
			// Fenced replicas with nothing left to take over are
			// forgotten after a day.
			if _, err := m.db.Write().ExecContext(ctx, forgetQuery, (24 * time.Hour).Milliseconds()); err != nil && ctx.Err() == nil {
				m.opts.Log.Warn("forget long-dead replicas", "error", err)
			}
		}
		if each != nil {
			each(ctx, fenced > 0 || beat%takeOverEvery == 0)
		}
	}
}

// Heartbeat renews this replica's liveness once.
func (m *Member) Heartbeat(ctx context.Context) error {
	var st Stats
	if m.opts.Stats != nil {
		st = m.opts.Stats()
	}
	sent := time.Now()
	// A heartbeat that can't go through within half a lease gives up:
	// the next one tries again, on a fresh connection if need be.
	ctx, cancel := context.WithTimeout(ctx, m.opts.Lease/2)
	defer cancel()
	// The heartbeat itself bypasses the local check (it is what renews
	// it), and the workload's queue for connections: a heartbeat that
	// waited there past the lease lapsed the replica it renews.
	beat, err := m.db.Priority(ctx)
	if err != nil {
		return fmt.Errorf("renew the heartbeat of replica %s: %w", m.id, err)
	}
	res, err := beat.ExecContext(ctx, heartbeatQuery, m.id, strings.Join(st.Adapters, ","), strings.Join(st.Channels, ","), st.Lanes, st.Queued)
	if err != nil {
		return fmt.Errorf("renew the heartbeat of replica %s: %w", m.id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		m.markFenced()
		return ErrFenced
	}
	m.beat.Store(&sent)
	return nil
}

func (m *Member) markFenced() {
	m.once.Do(func() {
		m.fenced.Store(true)
		m.opts.Log.Error(ErrFenced.Error(), "replica", m.id)
		close(m.dead)
	})
}

// Beats between the takeovers a replica does without having fenced
// anyone (in case the one that fenced a replica died before taking its
// work over), and between sweeps of long-dead replicas' rows.
const (
	takeOverEvery = 5
	forgetEvery   = 600
)

// Reap fences the replicas whose heartbeat is older than the lease, and
// returns how many it fenced.
func (m *Member) Reap(ctx context.Context) (int, error) { return m.reap(ctx, true) }

// reap is Reap; without fence it only looks (the live count, the peers).
func (m *Member) reap(ctx context.Context, fence bool) (int, error) {
	others, err := m.others(ctx, staleQuery, m.id)
	if err != nil {
		return 0, err
	}
	n, live := 0, int64(1)
	peers := map[string]string{}
	for _, o := range others {
		if o.age <= m.opts.Lease.Milliseconds() {
			live++
		}
		if o.age <= m.beatLate() {
			peers[o.id] = o.apiURL
		}
		why := ""
		switch {
		case o.age > m.opts.Lease.Milliseconds():
			why = fmt.Sprintf("its heartbeat lapsed %s ago", time.Duration(o.age)*time.Millisecond)
		case o.host == m.host && !processAlive(o.id, o.pid):
			why = "its process is gone"
		}
		if why != "" && fence {
			ok, err := m.fence(ctx, o.id, why)
			if err != nil {
				return n, err
			}
			if ok {
				n++
			}
		}
	}
	m.live.Store(live)
	m.peers.Store(&peers)
	return n, nil
}

// beatLate is how old, in milliseconds, a heartbeat may be before its
// replica is thought late (frozen, or cut off): two and a half beats.
func (m *Member) beatLate() int64 { return (2*m.opts.Heartbeat + m.opts.Heartbeat/2).Milliseconds() }

// LiveCount is how many replicas were live at the last look, this one
// included.
func (m *Member) LiveCount() int { return int(max(m.live.Load(), 1)) }

// Release gives up the hold name, for another replica to claim.
func (m *Member) Release(ctx context.Context, name string) error {
	m.mu.Lock()
	delete(m.holds, name)
	m.mu.Unlock()
	if _, err := m.db.Write().ExecContext(ctx, releaseQuery, name, m.id); err != nil {
		return fmt.Errorf("release %s: %w", name, err)
	}
	return nil
}

// Leave ends this replica's membership at a clean stop: its holds are
// freed at once for the others, and its row marked left.
func (m *Member) Leave(ctx context.Context) error {
	if m.fenced.Load() {
		return nil
	}
	m.db.SetFence(nil)
	defer ours.Delete(m.id)
	err := m.db.Tx(ctx, func(q dbutil.Querier) error {
		if _, err := q.ExecContext(ctx, dropHoldsQuery, m.id); err != nil {
			return err
		}
		_, err := q.ExecContext(ctx, leaveQuery, m.id)
		return err
	})
	if err != nil {
		return fmt.Errorf("leave the replicas: %w", err)
	}
	return nil
}

// Alive reports whether this replica may write: it has renewed its lease
// within the lease and has not been fenced.
func (m *Member) Alive() error {
	if m.fenced.Load() {
		return ErrFenced
	}
	if b := m.beat.Load(); b != nil && time.Since(*b) > m.opts.Lease {
		return dbutil.ErrLeaseLapsed
	}
	return nil
}

// AliveUntil is Alive with the moment this replica's lease ends, judged
// from the last heartbeat it sent: past it a survivor may fence it and take
// over what it holds, so nothing it begins may reach a platform after it.
// The zero time means no heartbeat yet bounds it.
func (m *Member) AliveUntil() (time.Time, error) {
	if err := m.Alive(); err != nil {
		return time.Time{}, err
	}
	if b := m.beat.Load(); b != nil {
		return b.Add(m.opts.Lease), nil
	}
	return time.Time{}, nil
}

// LaneHold is the hold name of a session's lane.
func LaneHold(lane string) string {
	sum := sha256.Sum256([]byte(lane))
	return "lane:" + hex.EncodeToString(sum[:16])
}

// ChannelHold is the hold name of a channel.
func ChannelHold(adapter string) string { return "channel:" + adapter }

// Holds reports whether this replica has the hold name, as far as it knows.
func (m *Member) Holds(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holds[name]
}

// Claim takes the hold name if it is free (or its holder fenced) and
// returns its holder: this replica's id when the claim succeeded.
func (m *Member) Claim(ctx context.Context, name string) (holder string, err error) {
	if m.Holds(name) {
		return m.id, nil
	}
	err = m.db.Tx(ctx, func(q dbutil.Querier) error {
		err := q.QueryRowContext(ctx, claimHoldQuery, name, m.id).Scan(&holder)
		if errors.Is(err, sql.ErrNoRows) {
			return q.QueryRowContext(ctx, holderQuery, name).Scan(&holder)
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("claim %s: %w", name, err)
	}
	if holder == m.id {
		m.mu.Lock()
		m.holds[name] = true
		m.mu.Unlock()
	}
	return holder, nil
}

// Holder is the live replica that has the hold name, or "".
func (m *Member) Holder(ctx context.Context, name string) (string, error) {
	if m.Holds(name) {
		return m.id, nil
	}
	var holder string
	err := m.db.Read().QueryRowContext(ctx, liveHolderQuery, name).Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the holder of %s: %w", name, err)
	}
	return holder, nil
}

// Route claims the hold name for this replica if it is free and returns
// where requests about it go: "" for here, else the API of the live
// replica holding it. A holder whose heartbeat is late (frozen, or cut
// off) is waited for, up to a lease, until it beats again or is fenced
// and the hold is claimed here.
func (m *Member) Route(ctx context.Context, name string) (apiURL string, err error) {
	apiURL, _, err = m.RouteHolder(ctx, name)
	return apiURL, err
}

// RouteHolder is Route that also names the holder requests go to ("" for
// here).
func (m *Member) RouteHolder(ctx context.Context, name string) (apiURL, holder string, err error) {
	m.mu.Lock()
	holder, ok := m.routes[name]
	m.mu.Unlock()
	if ok {
		if peers := m.peers.Load(); peers != nil {
			if u, live := (*peers)[holder]; live {
				return u, holder, nil
			}
		}
		m.mu.Lock()
		delete(m.routes, name)
		m.mu.Unlock()
	}
	deadline := time.Now().Add(m.opts.Lease + 2*m.opts.Heartbeat)
	for {
		// A read first: most sessions asked about are held already.
		holder, err := m.Holder(ctx, name)
		if err == nil && holder == "" {
			holder, err = m.Claim(ctx, name)
		}
		if err != nil {
			return "", "", err
		}
		if holder == m.id {
			return "", "", nil
		}
		if peers := m.peers.Load(); peers != nil {
			if u, live := (*peers)[holder]; live {
				m.remember(name, holder)
				return u, holder, nil
			}
		}
		var u string
		var age int64
		err = m.db.Read().QueryRowContext(ctx, apiURLQuery, holder).Scan(&u, &age)
		switch {
		case errors.Is(err, sql.ErrNoRows) && time.Now().After(deadline):
			// Fenced, its messages not yet taken over: served here.
			return "", "", nil
		case errors.Is(err, sql.ErrNoRows):
			// Fenced meanwhile: claim again once its lane is free.
		case err != nil:
			return "", "", fmt.Errorf("read replica %s: %w", holder, err)
		case age <= m.beatLate():
			m.remember(name, holder)
			return u, holder, nil
		case time.Now().After(deadline):
			return u, holder, nil
		}
		select {
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-time.After(m.opts.Heartbeat / 2):
		}
	}
}

// Late reports whether the replica id's heartbeat was late (or it was
// gone) at the last look: frozen, cut off from the database, or dead.
func (m *Member) Late(id string) bool {
	if id == m.id {
		return false
	}
	peers := m.peers.Load()
	if peers == nil {
		return false
	}
	_, live := (*peers)[id]
	return !live
}

// remember notes that requests about the hold name go to holder.
func (m *Member) remember(name, holder string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.routes) >= maxRoutes {
		clear(m.routes)
	}
	m.routes[name] = holder
}

// maxRoutes bounds the routes remembered (a map, emptied when full).
const maxRoutes = 100_000

// Replica is a live replica, as `parley replicas` lists it.
type Replica struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Version   string    `json:"version,omitempty"`
	APIURL    string    `json:"api_url,omitempty"`
	Started   time.Time `json:"started_at"`
	Heartbeat time.Time `json:"heartbeat_at"`
	// HeartbeatAgeMS is how long ago, on the database's clock.
	HeartbeatAgeMS int64    `json:"heartbeat_age_ms"`
	Adapters       []string `json:"adapters"`
	Channels       []string `json:"channels"`
	Lanes          int      `json:"lanes"`
	Queued         int      `json:"queued"`
	Self           bool     `json:"self,omitempty"`
}

// Live lists the live replicas, oldest first.
func (m *Member) Live(ctx context.Context) ([]Replica, error) {
	out, err := List(ctx, m.db)
	for i := range out {
		out[i].Self = out[i].ID == m.id
	}
	return out, err
}

// List lists the live replicas of a database, oldest first.
func List(ctx context.Context, db *dbutil.DB) ([]Replica, error) {
	if db.Dialect != dbutil.Postgres {
		return nil, nil
	}
	out, err := dbutil.Query(ctx, db.Read(), liveQuery, func(s dbutil.Scanner) (Replica, error) {
		var r Replica
		var started, beat int64
		var ads, chans string
		err := s.Scan(&r.ID, &r.Name, &r.Host, &r.PID, &r.Version, &r.APIURL, &started, &beat, &r.HeartbeatAgeMS,
			&ads, &chans, &r.Lanes, &r.Queued)
		r.Started, r.Heartbeat = dbutil.Time(started), dbutil.Time(beat)
		r.Adapters, r.Channels = split(ads), split(chans)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the replicas: %w", err)
	}
	return out, nil
}

func split(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}
