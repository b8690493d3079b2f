package cron

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// JobsOf turns the config's jobs into the cron package's, checking each
// schedule; a problem names the job's key and line.
func JobsOf(cfg *config.Config) ([]Job, error) {
	var jobs []Job
	var errs []error
	for i, cj := range cfg.Cron.Jobs {
		p := fmt.Sprintf("cron.jobs[%d]", i)
		targets, err := ParseTargets(cj.Notify)
		if err != nil {
			errs = append(errs, cfg.Problem(p+".notify", err.Error()))
			continue
		}
		j := Job{ID: cj.ID, Schedule: cj.Schedule, Timezone: cj.Timezone, AgentID: cj.Agent, Prompt: cj.Prompt,
			Notify: targets, Disabled: !cj.IsEnabled(), CatchUp: cj.CatchUp.Std(), Timeout: cj.Timeout.Std(), Source: SourceConfig}
		// The schedule is the likeliest mistake: point at its line.
		if _, err := ParseSchedule(cj.Schedule, cj.Timezone); err != nil {
			errs = append(errs, cfg.Problem(p+".schedule", err.Error()))
			continue
		}
		if err := j.Validate(); err != nil {
			errs = append(errs, cfg.Problem(p, err.Error()))
			continue
		}
		jobs = append(jobs, j)
	}
	return jobs, errors.Join(errs...)
}

// Open builds the scheduler on db, with cfg's jobs written in (see
// Store.SyncConfig); opts gives the rest.
func Open(ctx context.Context, db *dbutil.DB, cfg *config.Config, opts Options) (*Scheduler, error) {
	jobs, err := JobsOf(cfg)
	if err != nil {
		return nil, err
	}
	opts.Store = NewStore(db, nil)
	if err := opts.Store.SyncConfig(ctx, jobs); err != nil {
		return nil, fmt.Errorf("store the config's cron jobs: %w", err)
	}
	return New(opts)
}

// Apply puts a reloaded config's jobs in place of the running ones.
func (s *Scheduler) Apply(ctx context.Context, cfg *config.Config) error {
	jobs, err := JobsOf(cfg)
	if err != nil {
		return err
	}
	if err := s.store.SyncConfig(ctx, jobs); err != nil {
		return fmt.Errorf("store its cron jobs: %w", err)
	}
	s.Reload()
	return nil
}

// TargetFor is the chat a session's scheduled jobs report to by default
// (ToolOptions.TargetFor): the session's own, on the one channel of its
// surface. With several channels of one type, it can't tell which, and
// the job only keeps its results (the tool says so).
func TargetFor(cfg func() *config.Config) func(context.Context, sessions.Key) (Target, bool) {
	return func(_ context.Context, key sessions.Key) (Target, bool) {
		var match []config.Adapter
		for _, a := range cfg().Adapters {
			if a.Type == key.Surface {
				match = append(match, a)
			}
		}
		if len(match) != 1 {
			return Target{}, false
		}
		return Target{Adapter: adapters.ID(match[0].ID), ChatID: key.SurfaceID}, true
	}
}

// UnattendedFor is a cron fire's answerer of permission questions: its
// job's allow_tools in cfg.
func UnattendedFor(cfg func() *config.Config) func(chatID string) *permissions.Unattended {
	return func(chatID string) *permissions.Unattended {
		jobID, _, _ := ParseChatID(chatID)
		u := &permissions.Unattended{What: fmt.Sprintf("cron job %q", jobID),
			Key: "allow_tools on the job in the config (only jobs written in the config can allow tools)"}
		for i, j := range cfg().Cron.Jobs {
			if j.ID == jobID {
				u.Key, u.Allow = fmt.Sprintf("cron.jobs[%d].allow_tools", i), j.AllowTools
			}
		}
		return u
	}
}

// The schedule tools are built in, over the daemon's *cron.Scheduler.
func init() {
	tools.RegisterBuiltin("cron", func(deps tools.Deps) []tools.Tool {
		var opts ToolOptions
		if deps.Config != nil {
			opts.TargetFor = TargetFor(deps.Config)
		}
		return tools.Part[*Scheduler](deps).Tools(opts)
	})
}
