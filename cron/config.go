package cron

import (
	"errors"
	"fmt"

	"github.com/parleyd/parley/config"
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
