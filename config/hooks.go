package config

import (
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/permissions"
)

// Hook is an incoming webhook served at /hooks/{id}: a request that passes
// its auth becomes a prompt for an agent, in a fresh session.
type Hook struct {
	ID string `yaml:"id"`
	// Auth is how a request proves it comes from the sender: "hmac"
	// (X-Parley-Timestamp and X-Parley-Signature), "github"
	// (X-Hub-Signature-256) or "token" (Authorization: Bearer).
	Auth   string `yaml:"auth"`
	Secret Secret `yaml:"secret"`
	// Agent answers; empty means the first agent.
	Agent string `yaml:"agent"`
	// Prompt is a Go text/template over the JSON payload.
	Prompt string `yaml:"prompt"`
	// Mode is "async" (202 at once, with the delivery id) or "sync" (wait
	// up to Timeout and return the agent's reply).
	Mode    string   `yaml:"mode"`
	Timeout Duration `yaml:"timeout"`
	// Notify lists where the reply goes, as "<adapter id>:<chat id>".
	Notify []string `yaml:"notify"`
	// AllowTools lists the tools (names or patterns) that may run in the
	// hook's turns where a permission rule says ask: nobody is there to
	// answer, so any other such call is denied.
	AllowTools []string `yaml:"allow_tools"`

	tmpl *template.Template
}

// Defaults for a hook.
const (
	DefaultHookMode    = "async"
	DefaultHookTimeout = 60 * time.Second
)

// Template is the hook's parsed prompt template.
func (h Hook) Template() *template.Template { return h.tmpl }

// SetDefaults fills in the hook's absent settings; its agent's default,
// the first agent, is the root's to fill in.
func (h *Hook) SetDefaults(section.Set) {
	h.ID = strings.TrimSpace(h.ID)
	h.Auth = strings.ToLower(strings.TrimSpace(h.Auth))
	h.Agent = strings.TrimSpace(h.Agent)
	h.Mode = section.Normalize(h.Mode, DefaultHookMode)
	if h.Timeout == 0 {
		h.Timeout = Duration(DefaultHookTimeout)
	}
}

// Check reports the hook's own problems, and parses its template; its
// id's uniqueness, its agent and its notify targets' adapters are the
// root's to check.
func (h *Hook) Check(r section.Reporter) {
	switch {
	case h.ID == "":
		r.Add("id", "required; "+adapterIDRule)
	case !adapterID.MatchString(h.ID):
		r.Add("id", fmt.Sprintf("%q is not a valid hook id; %s", h.ID, adapterIDRule))
	}
	switch h.Auth {
	case "hmac", "github", "token":
	default:
		r.Add("auth", fmt.Sprintf(`%q is not allowed; use "hmac" (X-Parley-Signature), "github" (X-Hub-Signature-256) or "token" (Authorization: Bearer)`, h.Auth))
	}
	if h.Secret == "" {
		r.Add("secret", `required; make one with "openssl rand -hex 32" and set it from the environment, such as "${CI_HOOK_SECRET}"`)
	} else if msg := weakSecret(h.Secret.Reveal(), "CI_HOOK_SECRET"); msg != "" {
		r.Add("secret", msg)
	}
	if strings.TrimSpace(h.Prompt) == "" {
		r.Add("prompt", `required; a template over the payload, such as "New PR {{.pull_request.title}} by {{.sender.login}}"`)
	} else if t, err := template.New(h.ID).Option("missingkey=zero").Parse(h.Prompt); err != nil {
		r.Add("prompt", fmt.Sprintf("the template doesn't parse: %s", strings.TrimPrefix(err.Error(), "template: ")))
	} else {
		h.tmpl = t
	}
	switch h.Mode {
	case "async", "sync":
	default:
		r.Add("mode", fmt.Sprintf(`%q is not allowed; use "async" (answer 202 at once) or "sync" (wait for the agent's reply)`, h.Mode))
	}
	if h.Timeout <= 0 || h.Timeout.Std() > 10*time.Minute {
		r.Add("timeout", fmt.Sprintf(`%s is out of range; use a duration above 0 and at most 10m, such as "60s"`, h.Timeout))
	}
	for j, n := range h.Notify {
		if a, chat, ok := strings.Cut(n, ":"); !ok || a == "" || chat == "" {
			r.Add(fmt.Sprintf("notify[%d]", j), fmt.Sprintf(`%q is not a target; use "<adapter id>:<chat id>", such as "tg-main:123456"`, n))
		}
	}
	permissions.CheckAllowTools(r, "allow_tools", h.AllowTools)
}

// checkHookRefs reports what the hooks refer to that is not there: a
// second hook of the same id, an agent, a notify target's adapter.
func (c *Config) checkHookRefs(ck *checker) {
	first := map[string]int{}
	for i, h := range c.Hooks {
		p := fmt.Sprintf("hooks[%d].", i)
		if adapterID.MatchString(h.ID) {
			if j, dup := first[h.ID]; dup {
				ck.add(p+"id", fmt.Sprintf("%q is used by hooks[%d] too; hook ids must be unique", h.ID, j))
			}
			first[h.ID] = i
		}
		if _, ok := c.Agent(h.Agent); !ok {
			ck.add(p+"agent", fmt.Sprintf("%q is not an agent in agents", h.Agent))
		}
		for j, n := range h.Notify {
			if a, chat, ok := strings.Cut(n, ":"); ok && a != "" && chat != "" {
				c.checkNotifyAdapter(ck, fmt.Sprintf("%snotify[%d]", p, j), n)
			}
		}
	}
}

// checkNotifyAdapter reports a notify target whose adapter is not in
// adapters: its notes would have no channel to leave by. An adapter that is
// configured but skipped for want of credentials is fine; the same config
// serves environments with and without the token.
func (c *Config) checkNotifyAdapter(ck *checker, key, target string) {
	if problem := c.notifyAdapterProblem(target); problem != "" {
		ck.add(key, problem)
	}
}

// CheckNotifyTarget says what is wrong with a notify target,
// "<adapter id>:<chat id>", whose adapter is not a channel of this config
// (its form is cron.ParseTarget's to check).
func (c *Config) CheckNotifyTarget(target string) error {
	if problem := c.notifyAdapterProblem(target); problem != "" {
		return errors.New(problem)
	}
	return nil
}

// notifyAdapterProblem is what is wrong with target's adapter, or "".
func (c *Config) notifyAdapterProblem(target string) string {
	id, _, ok := strings.Cut(target, ":")
	if !ok || id == "" {
		return ""
	}
	var ids []string
	for _, a := range c.Adapters {
		if a.ID == id {
			return ""
		}
		if a.ID != "" {
			ids = append(ids, a.ID)
		}
	}
	if len(ids) == 0 {
		return fmt.Sprintf("%q names adapter %q, but there are no adapters; add it under adapters, or remove the target", target, id)
	}
	return fmt.Sprintf("%q names adapter %q, which is not in adapters; use one of: %s", target, id, strings.Join(ids, ", "))
}
