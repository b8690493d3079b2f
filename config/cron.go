package config

import (
	"fmt"
	"strings"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/permissions"
)

// Cron holds the scheduled jobs written in the config. Jobs can also be
// added with `parley cron add` or by agents with the schedule tools; those
// live in the database.
type Cron struct {
	Jobs []CronJob `yaml:"jobs"`
}

// CronJob is one scheduled job: at each time of its schedule, its prompt
// runs as a turn of its agent, in a fresh session, and the reply goes to
// its notify targets.
type CronJob struct {
	ID       string `yaml:"id"`
	Schedule string `yaml:"schedule"`
	Timezone string `yaml:"timezone"`
	// Agent answers; empty means the first agent.
	Agent  string   `yaml:"agent"`
	Prompt string   `yaml:"prompt"`
	Notify []string `yaml:"notify"`
	// Enabled is true unless set to false.
	Enabled *bool `yaml:"enabled"`
	// CatchUp is how late a fire missed while parley was down may still
	// run, once; 0 turns catching up off.
	CatchUp Duration `yaml:"catch_up"`
	Timeout Duration `yaml:"timeout"`
	// AllowTools lists the tools (names or patterns) that may run in the
	// job's turns where a permission rule says ask: nobody is there to
	// answer, so any other such call is denied.
	AllowTools []string `yaml:"allow_tools"`
}

// IsEnabled reports whether the job fires.
func (j CronJob) IsEnabled() bool { return j.Enabled == nil || *j.Enabled }

// SetDefaults trims the job's keys; its agent's default, the first
// agent, is the root's to fill in.
func (j *CronJob) SetDefaults(section.Set) {
	j.ID = strings.TrimSpace(j.ID)
	j.Schedule = strings.TrimSpace(j.Schedule)
	j.Timezone = strings.TrimSpace(j.Timezone)
	j.Agent = strings.TrimSpace(j.Agent)
}

// Check reports the job's allow_tools patterns that don't compile. The
// job itself (its schedule, prompt, durations) is checked by the cron
// package, which cmd/parley runs at start and in config check, so each
// problem is reported once; what needs the rest of the config is the
// root's (checkCronRefs).
func (j CronJob) Check(r section.Reporter) {
	permissions.CheckAllowTools(r, "allow_tools", j.AllowTools)
}

// checkCronRefs reports what the jobs refer to that is not there: a
// second job of the same id, an agent, a notify target's adapter.
func (c *Config) checkCronRefs(ck *checker) {
	first := map[string]int{}
	for i, j := range c.Cron.Jobs {
		p := fmt.Sprintf("cron.jobs[%d].", i)
		if j.ID != "" {
			if k, dup := first[j.ID]; dup {
				ck.add(p+"id", fmt.Sprintf("%q is used by cron.jobs[%d] too; job ids must be unique", j.ID, k))
			}
			first[j.ID] = i
		}
		if _, ok := c.Agent(j.Agent); !ok {
			ck.add(p+"agent", fmt.Sprintf("%q is not an agent in agents", j.Agent))
		}
		for k, n := range j.Notify {
			c.checkNotifyAdapter(ck, fmt.Sprintf("%snotify[%d]", p, k), strings.TrimSpace(n))
		}
	}
}

// Problem reports a problem found outside this package (the cron package's
// schedule check) at key's line, like every other config problem.
func (c *Config) Problem(key, msg string) Problem {
	ck := &checker{file: c.file, lines: c.lines}
	return Problem{File: c.file, Line: ck.lineOf(key), Key: key, Message: msg}
}
