package config

import (
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"
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

func (c *Config) hookDefaults() {
	for i := range c.Hooks {
		h := &c.Hooks[i]
		h.ID = strings.TrimSpace(h.ID)
		h.Auth = strings.ToLower(strings.TrimSpace(h.Auth))
		h.Agent = strings.TrimSpace(h.Agent)
		h.Mode = normalize(h.Mode, DefaultHookMode)
		if h.Timeout == 0 {
			h.Timeout = Duration(DefaultHookTimeout)
		}
		if h.Agent == "" && len(c.Agents) > 0 {
			h.Agent = c.Agents[0].ID
		}
	}
}

func (c *Config) validateHooks(ck *checker) {
	first := map[string]int{}
	for i := range c.Hooks {
		h := &c.Hooks[i]
		p := fmt.Sprintf("hooks[%d].", i)
		switch {
		case h.ID == "":
			ck.add(p+"id", "required; "+adapterIDRule)
		case !adapterID.MatchString(h.ID):
			ck.add(p+"id", fmt.Sprintf("%q is not a valid hook id; %s", h.ID, adapterIDRule))
		default:
			if j, dup := first[h.ID]; dup {
				ck.add(p+"id", fmt.Sprintf("%q is used by hooks[%d] too; hook ids must be unique", h.ID, j))
			}
			first[h.ID] = i
		}
		switch h.Auth {
		case "hmac", "github", "token":
		default:
			ck.add(p+"auth", fmt.Sprintf(`%q is not allowed; use "hmac" (X-Parley-Signature), "github" (X-Hub-Signature-256) or "token" (Authorization: Bearer)`, h.Auth))
		}
		if h.Secret == "" {
			ck.add(p+"secret", `required; make one with "openssl rand -hex 32" and set it from the environment, such as "${CI_HOOK_SECRET}"`)
		} else if msg := weakSecret(h.Secret.Reveal(), "CI_HOOK_SECRET"); msg != "" {
			ck.add(p+"secret", msg)
		}
		if _, ok := c.Agent(h.Agent); !ok {
			ck.add(p+"agent", fmt.Sprintf("%q is not an agent in agents", h.Agent))
		}
		if strings.TrimSpace(h.Prompt) == "" {
			ck.add(p+"prompt", `required; a template over the payload, such as "New PR {{.pull_request.title}} by {{.sender.login}}"`)
		} else if t, err := template.New(h.ID).Option("missingkey=zero").Parse(h.Prompt); err != nil {
			ck.add(p+"prompt", fmt.Sprintf("the template doesn't parse: %s", strings.TrimPrefix(err.Error(), "template: ")))
		} else {
			h.tmpl = t
		}
		switch h.Mode {
		case "async", "sync":
		default:
			ck.add(p+"mode", fmt.Sprintf(`%q is not allowed; use "async" (answer 202 at once) or "sync" (wait for the agent's reply)`, h.Mode))
		}
		if h.Timeout <= 0 || h.Timeout.Std() > 10*time.Minute {
			ck.add(p+"timeout", fmt.Sprintf(`%s is out of range; use a duration above 0 and at most 10m, such as "60s"`, h.Timeout))
		}
		for j, n := range h.Notify {
			if a, chat, ok := strings.Cut(n, ":"); !ok || a == "" || chat == "" {
				ck.add(fmt.Sprintf("%snotify[%d]", p, j), fmt.Sprintf(`%q is not a target; use "<adapter id>:<chat id>", such as "tg-main:123456"`, n))
			} else {
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
