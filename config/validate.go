package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/parleyd/parley/internal/lazyregexp"
	"github.com/parleyd/parley/sessions"
)

var agentID = idPattern{max: 64, more: "_-"}

// idPattern is an id's rule: 1 to max characters from a-z, 0-9 and more,
// starting with a letter or a digit. It is checked by hand: the agents'
// and the channels' ids are checked at every start, and compiling a
// regexp for them took most of the time loading the config did.
type idPattern struct {
	max  int
	more string
}

// MatchString reports whether s is such an id.
func (p idPattern) MatchString(s string) bool {
	if s == "" || len(s) > p.max {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && strings.IndexByte(p.more, c) >= 0:
		default:
			return false
		}
	}
	return true
}

const modelRule = `use "echo" (offline), "openai/<model>" such as "openai/gpt-4o-mini", or "anthropic/<model>" such as "anthropic/claude-sonnet-4-5"`

const agentIDRule = `use 1-64 characters from a-z, 0-9, "_" and "-", starting with a letter or digit`

// validate adds a problem to ck for every invalid setting: each section's
// own (walkChecks, which also caches each agent's time zone), then those
// that refer from one section to another.
func (c *Config) validate(ck *checker) {
	// Ids first: where a list entry's problems share a line, its id's
	// come first.
	c.checkAdapterIDs(ck)
	c.checkMCPIDs(ck)
	walkChecks(reflect.ValueOf(c).Elem(), "", reporter{ck})
	c.noSecretRefs(ck)
	c.checkHookRefs(ck)
	c.checkCronRefs(ck)
	c.checkSessionHookAgents(ck)
	c.checkHarnessRefs(ck)
	c.checkProjectRuleAgents(ck)

	firstUse := map[string]int{}
	for i, a := range c.Agents {
		if a.ID == "" {
			continue
		}
		if j, dup := firstUse[a.ID]; dup {
			ck.add(fmt.Sprintf("agents[%d].id", i), fmt.Sprintf("%q is used by agents[%d] too; agent ids must be unique", a.ID, j))
			continue
		}
		firstUse[a.ID] = i
	}

	ids := make([]string, 0, len(c.Agents))
	for _, a := range c.Agents {
		if a.ID != "" {
			ids = append(ids, a.ID)
		}
	}
	known := "use the id of one of the agents: " + strings.Join(ids, ", ")
	for i, a := range c.Agents {
		seen := map[string]int{}
		for j, id := range a.Subagents {
			key := fmt.Sprintf("agents[%d].subagents[%d]", i, j)
			switch k, dup := seen[id]; {
			case dup:
				ck.add(key, fmt.Sprintf("%q is listed as subagents[%d] too; list each agent once", id, k))
			case id == a.ID && id != "":
				ck.add(key, fmt.Sprintf("%q is this agent; an agent may always hand tasks to itself, so leave it out", id))
			default:
				if _, ok := firstUse[id]; !ok {
					ck.add(key, fmt.Sprintf("%q is not an agent; %s", id, known))
				}
			}
			seen[id] = j
		}
	}
	for i, b := range c.Bindings {
		p := fmt.Sprintf("bindings[%d]", i)
		switch _, ok := firstUse[b.Agent]; {
		case b.Agent == "":
			ck.add(p+".agent", "required; "+known)
		case !ok:
			ck.add(p+".agent", fmt.Sprintf("%q is not an agent; %s", b.Agent, known))
		}
		if b.Workspace != "" && !sessions.ValidWorkspaceID(b.Workspace) {
			ck.add(p+".workspace", fmt.Sprintf("%q is not a workspace id; %s", b.Workspace, sessions.WorkspaceIDRule))
		}
		if b.Adapter == "" && b.Chat == "" && b.User == "" {
			ck.add(p, "sets none of adapter, chat and user, so it matches everything; "+
				"put that agent first in agents instead, or name the adapter, chat or user it is for")
		}
	}
}

// MinSecretLen is the fewest bytes an API token or a signing secret (a
// hook's, the reply callbacks') may have.
const MinSecretLen = 32

// placeholderSecrets are secrets parley's docs have shown. A copy of the
// docs must not go live with one, whatever its length.
var placeholderSecrets = []string{"change-me-to-a-long-secret"}

// placeholderWords mark a secret someone meant to replace.
var placeholderWords = []string{"change-me", "changeme", "change_me", "replace-me", "replaceme", "your-secret", "your_secret"}

// weakSecret says what is wrong with a secret, or "" when nothing is. env
// names the variable the docs suggest keeping it in.
func weakSecret(s, env string) string {
	how := fmt.Sprintf(`; make one with "openssl rand -hex 32" and set it from the environment, such as "${%s}"`, env)
	lower := strings.ToLower(strings.TrimSpace(s))
	if strings.Contains(s, secretRefPrefix) {
		return "" // a stored secret: checked once resolved (weakResolvedSecrets)
	}
	if slices.Contains(placeholderSecrets, lower) {
		return "is the placeholder parley's docs show, which anyone can read" + how
	}
	for _, w := range placeholderWords {
		if strings.Contains(lower, w) {
			return fmt.Sprintf("is a placeholder (it says %q), which anyone can guess%s", w, how)
		}
	}
	if len(s) < MinSecretLen {
		return fmt.Sprintf("is %d bytes, too short to resist guessing; use at least %d random bytes%s", len(s), MinSecretLen, how)
	}
	return ""
}

// hostName is a DNS host name: dot-separated labels of letters, digits and
// inner hyphens.
var hostName = lazyregexp.New(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$`)

// callbackAllowEntry reports whether e is an IP address, a CIDR network or
// a host name (what api.ParseCallbackAllow takes).
func callbackAllowEntry(e string) bool {
	e = strings.TrimSpace(e)
	if _, err := netip.ParsePrefix(e); err == nil {
		return true
	}
	if _, err := netip.ParseAddr(e); err == nil {
		return true
	}
	return len(e) <= 253 && hostName.MatchString(e)
}
