package cron

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/dbutil"
)

// Config jobs with several replicas. Each replica reads its own config
// file, and the files may disagree for a while (a rolling deploy, a
// canary). A process declares the jobs its config has, in
// cron_config_declarations: one row per job and process, renewed by its
// running scheduler and withdrawn when the scheduler stops. A config job is
// removed only once no live declaration of it is left, so a replica whose
// config lacks a job never removes one that another running replica's
// config has.
const (
	// The config wins: a job from it replaces whatever has its id, and
	// updated_at moves only when something changed.
	upsertConfigJobQuery = `INSERT INTO cron_jobs (` + jobColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '', '', '', 'config', $10, $10)
	ON CONFLICT (id) DO UPDATE SET schedule = excluded.schedule, timezone = excluded.timezone,
		agent_id = excluded.agent_id, prompt = excluded.prompt, notify = excluded.notify,
		enabled = excluded.enabled, catch_up_ms = excluded.catch_up_ms, timeout_ms = excluded.timeout_ms,
		owner_user_id = '', owner_surface = '', owner_surface_id = '', source = 'config',
		updated_at = excluded.updated_at
	WHERE cron_jobs.schedule <> excluded.schedule OR cron_jobs.timezone <> excluded.timezone
		OR cron_jobs.agent_id <> excluded.agent_id OR cron_jobs.prompt <> excluded.prompt
		OR cron_jobs.notify <> excluded.notify OR cron_jobs.enabled <> excluded.enabled
		OR cron_jobs.catch_up_ms <> excluded.catch_up_ms OR cron_jobs.timeout_ms <> excluded.timeout_ms
		OR cron_jobs.source <> 'config'`

	// A config job no replica declared for a while, and that one removed,
	// comes back as this process's config has it when the process renews
	// its declaration (it was paused past the lease, or cut off from the
	// database); a stored one is left as it stands.
	restoreConfigJobQuery = `INSERT INTO cron_jobs (` + jobColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '', '', '', 'config', $10, $10)
	ON CONFLICT (id) DO NOTHING`

	declareConfigJobQuery = `INSERT INTO cron_config_declarations (job_id, instance, declared_until) VALUES ($1, $2, $3)
	ON CONFLICT (job_id, instance) DO UPDATE SET declared_until = excluded.declared_until`

	renewConfigQuery = `UPDATE cron_config_declarations SET declared_until = $2 WHERE instance = $1`

	withdrawConfigQuery = `DELETE FROM cron_config_declarations WHERE instance = $1`

	// On SQLite one parley process holds the file, so another instance's
	// declarations are those of a process that is gone.
	dropOtherDeclarationsQuery = `DELETE FROM cron_config_declarations WHERE instance <> $1`

	dropLapsedDeclarationsQuery = `DELETE FROM cron_config_declarations WHERE declared_until <= $1`

	removeUndeclaredQuery = `DELETE FROM cron_jobs WHERE source = 'config' AND NOT EXISTS
	(SELECT 1 FROM cron_config_declarations d WHERE d.job_id = cron_jobs.id AND d.declared_until > $1)
	RETURNING id`

	// configRowsQuery says whether any config job or declaration is
	// stored: without one, a config with no jobs has nothing to change.
	configRowsQuery = `SELECT EXISTS (SELECT 1 FROM cron_config_declarations) OR EXISTS (SELECT 1 FROM cron_jobs WHERE source = 'config')`

	// Replicas change declarations one at a time, so a removal never runs
	// on a snapshot that misses another replica's declaration just made.
	configLockQuery = `SELECT pg_advisory_xact_lock(7021292373850171749)`
)

// ConfigLease is how long a process's declaration of its config's jobs
// lasts unless renewed. Its running scheduler renews it at each poll (at
// most a third of it apart) and withdraws it when it stops, so a replica
// that crashed keeps its config jobs in place for this long.
const ConfigLease = time.Minute

// SyncConfig stores the config's jobs, at a start or a reload: each is
// inserted or updated (a config job replaces a CLI or tool job with its id:
// the config wins, and of two replicas whose configs differ on a job, the
// last to start or reload sets it). This process then declares them, and
// config jobs no running process declares any more are removed; one that
// another replica's config still has stays. CLI and tool jobs are left
// alone. Every job is validated before anything changes.
func (s *Store) SyncConfig(ctx context.Context, jobs []Job) error {
	seen := make(map[string]bool, len(jobs))
	for i := range jobs {
		jobs[i].Source = SourceConfig
		jobs[i].Owner = Owner{}
		if jobs[i].ID == "" {
			return fmt.Errorf("%w: cron job %d has no id; give each config job an id", ErrInvalidJob, i)
		}
		if err := jobs[i].Validate(); err != nil {
			return err
		}
		if seen[jobs[i].ID] {
			return fmt.Errorf("%w: two config jobs have the id %s; ids must be unique", ErrInvalidJob, jobs[i].ID)
		}
		seen[jobs[i].ID] = true
	}
	if len(jobs) == 0 && !s.configRows(ctx) {
		// The common start without config jobs: one read, no write
		// transaction (and its fsync) on the way to ready.
		s.mu.Lock()
		s.config = []Job{}
		s.mu.Unlock()
		return nil
	}
	now := s.now()
	err := s.configTx(ctx, func(q dbutil.Querier) error {
		if s.db.Dialect != dbutil.Postgres {
			if _, err := q.ExecContext(ctx, dropOtherDeclarationsQuery, s.instance); err != nil {
				return fmt.Errorf("drop the config declarations of an earlier process: %w", err)
			}
		}
		if _, err := q.ExecContext(ctx, withdrawConfigQuery, s.instance); err != nil {
			return fmt.Errorf("withdraw the config's cron jobs: %w", err)
		}
		for _, j := range jobs {
			if err := s.declare(ctx, q, upsertConfigJobQuery, j, now); err != nil {
				return err
			}
		}
		_, err := s.removeUndeclared(ctx, q, now)
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.config = append([]Job{}, jobs...)
	s.mu.Unlock()
	return nil
}

// configRows reports whether any config job or declaration is stored
// (true when it can't tell).
func (s *Store) configRows(ctx context.Context) bool {
	var found bool
	if err := s.db.Read().QueryRowContext(ctx, configRowsQuery).Scan(&found); err != nil {
		return true
	}
	return found
}

// declares reports whether this process has a config whose jobs it
// declares (SyncConfig ran).
func (s *Store) declares() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.config != nil
}

// renews reports whether the running scheduler renews this process's
// declaration: when it has one and other processes may use the database.
// A SQLite file this process holds has no other replica to keep apart
// from, so the declaration SyncConfig made stands (nothing else removes
// config jobs) and an idle daemon writes nothing every few seconds.
func (s *Store) renews() bool {
	return s.declares() && s.db.Mark() == dbutil.NoMark
}

// renewConfig renews this process's declaration of its config's jobs and
// removes the config jobs whose declarations all lapsed (every replica
// whose config had them stopped or crashed). It returns their ids.
func (s *Store) renewConfig(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	jobs := s.config
	s.mu.Unlock()
	now := s.now()
	var removed []string
	err := s.configTx(ctx, func(q dbutil.Querier) error {
		res, err := q.ExecContext(ctx, renewConfigQuery, s.instance, dbutil.Millis(now.Add(ConfigLease)))
		if err != nil {
			return fmt.Errorf("renew the config's cron jobs: %w", err)
		}
		// After a withdrawal (a scheduler started again in this process),
		// or a pause past the lease, declare the config's jobs again.
		if n, err := res.RowsAffected(); err != nil || int(n) < len(jobs) {
			for _, j := range jobs {
				if err := s.declare(ctx, q, restoreConfigJobQuery, j, now); err != nil {
					return err
				}
			}
		}
		removed, err = s.removeUndeclared(ctx, q, now)
		return err
	})
	return removed, err
}

// declare stores config job j with query (upsertConfigJobQuery or
// restoreConfigJobQuery) and declares it for this process.
func (s *Store) declare(ctx context.Context, q dbutil.Querier, query string, j Job, now time.Time) error {
	notify, err := encodeTargets(j.Notify)
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, query, j.ID, strings.TrimSpace(j.Schedule), strings.TrimSpace(j.Timezone),
		j.AgentID, j.Prompt, notify, j.Enabled(), j.CatchUp.Milliseconds(), j.Timeout.Milliseconds(), dbutil.Millis(now)); err != nil {
		return fmt.Errorf("store config cron job %s: %w", j.ID, err)
	}
	if _, err := q.ExecContext(ctx, declareConfigJobQuery, j.ID, s.instance, dbutil.Millis(now.Add(ConfigLease))); err != nil {
		return fmt.Errorf("declare config cron job %s: %w", j.ID, err)
	}
	return nil
}

// withdrawConfig drops this process's declarations, as its scheduler
// stops. While other replicas run, it also removes at once the config jobs
// none of them declares: the last replica whose config has a job takes it
// with it, and no other replica fires it again (a fire checks its job,
// begin). The last replica to stop leaves the jobs as they are, for the
// next start to reconcile (their receipts and @every times kept).
func (s *Store) withdrawConfig(ctx context.Context) ([]string, error) {
	var removed []string
	err := s.configTx(ctx, func(q dbutil.Querier) error {
		if _, err := q.ExecContext(ctx, withdrawConfigQuery, s.instance); err != nil {
			return fmt.Errorf("withdraw the config's cron jobs: %w", err)
		}
		if s.db.Dialect != dbutil.Postgres {
			return nil
		}
		var others bool
		if err := q.QueryRowContext(ctx, otherReplicasQuery, s.instance, dbutil.Millis(s.now())).Scan(&others); err != nil {
			return fmt.Errorf("look for other replicas: %w", err)
		}
		if !others {
			return nil
		}
		var err error
		removed, err = s.removeUndeclared(ctx, q, s.now())
		return err
	})
	return removed, err
}

// otherReplicasQuery says whether other processes run on the database:
// replicas besides this process's own (live, its row not yet left), or
// live declarations of other processes ($1 is this one, $2 now).
const otherReplicasQuery = `SELECT (SELECT COUNT(*) FROM replicas WHERE fenced_at IS NULL) > 1
	OR EXISTS (SELECT 1 FROM cron_config_declarations WHERE instance <> $1 AND declared_until > $2)`

func (s *Store) removeUndeclared(ctx context.Context, q dbutil.Querier, now time.Time) ([]string, error) {
	if _, err := q.ExecContext(ctx, dropLapsedDeclarationsQuery, dbutil.Millis(now)); err != nil {
		return nil, fmt.Errorf("drop lapsed config declarations: %w", err)
	}
	ids, err := dbutil.Query(ctx, q, removeUndeclaredQuery, func(r dbutil.Scanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, dbutil.Millis(now))
	if err != nil {
		return nil, fmt.Errorf("remove config cron jobs no config has: %w", err)
	}
	return ids, nil
}

// configTx runs fn in a transaction that, on PostgreSQL, holds the lock
// that orders every replica's changes to the declarations.
func (s *Store) configTx(ctx context.Context, fn func(q dbutil.Querier) error) error {
	return s.db.Tx(ctx, func(q dbutil.Querier) error {
		if s.db.Dialect == dbutil.Postgres {
			if _, err := q.ExecContext(ctx, configLockQuery); err != nil {
				return fmt.Errorf("lock the config declarations: %w", err)
			}
		}
		return fn(q)
	})
}
