package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/sessions"
)

// Adapter is one configured channel instance, e.g. a Telegram bot. The keys
// here are the gateway's own (which adapter, who may talk to it); every
// other key in the entry belongs to the adapter type, which decodes it
// strictly with Decode, so this package never knows an adapter's fields.
type Adapter struct {
	ID   string `yaml:"id"`
	Type string `yaml:"type"`
	// DMPolicy decides who may talk to the bot in a direct chat: "open"
	// (anyone), "allowlist" (only Allow) or "pairing" (Allow, plus anyone
	// an operator approves with a one-time code).
	DMPolicy string `yaml:"dm_policy"`
	// GroupPolicy decides when the bot answers in a group: "mention" (when
	// addressed), "always" or "never".
	GroupPolicy string `yaml:"group_policy"`
	// Allow lists the platform user ids always let in.
	Allow []string `yaml:"allow"`
	// Groups decides which groups the bot takes part in at all.
	Groups AdapterGroups `yaml:"groups"`
	// Stream shows replies as they are written, by editing one message,
	// on channels that can edit messages.
	Stream bool `yaml:"stream"`
	// Workspace, if set, is the workspace of the channel's sessions (a
	// binding's own comes first): part of their key, and the scope of
	// their memory.
	Workspace string `yaml:"workspace"`
	// AckReaction, if set, is the reaction (an emoji, such as "👀") the
	// bot puts on each message it takes for a turn, taken away once the
	// message is answered: a sign it got it while the queue is long.
	// Off by default; on channels that can react (Telegram, Discord,
	// WhatsApp).
	AckReaction string `yaml:"ack_reaction"`

	rest *yaml.Node // the adapter type's own keys
	file string
	path string
}

// AdapterGroups is which groups a channel's bot takes part in.
type AdapterGroups struct {
	// Policy is "pairing" (the groups in Allow, plus those an approved
	// person paired with /pair in the group), "allowlist" (only Allow) or
	// "open" (any group the bot is in).
	Policy string `yaml:"policy"`
	// Allow lists the platform chat ids of groups always let in.
	Allow []string `yaml:"allow"`
}

// maxAckReaction bounds ack_reaction in bytes: an emoji of several code
// points, or a Discord server emoji's name:id.
const maxAckReaction = 64

// Defaults for an adapter entry's gateway keys.
const (
	DefaultDMPolicy     = "pairing"
	DefaultGroupPolicy  = "mention"
	DefaultGroupsPolicy = "pairing"
)

var adapterType = reflect.TypeFor[Adapter]()

// adapterKeys are the keys Adapter itself holds; the rest go to the type.
var adapterKeys = func() map[string]bool {
	names, _ := yamlFields(adapterType)
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}()

// UnmarshalYAML keeps the entry's type-specific keys aside for Decode.
func (a *Adapter) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping of keys")
	}
	own := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	rest := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if adapterKeys[k.Value] {
			own.Content = append(own.Content, k, v)
		} else {
			rest.Content = append(rest.Content, k, v)
		}
	}
	type plain Adapter // without this method
	var p plain
	if err := own.Decode(&p); err != nil {
		return err
	}
	*a = Adapter(p)
	a.rest = rest
	return nil
}

// Decode strictly decodes the entry's type-specific keys into v, a pointer
// to the adapter type's config struct (with yaml tags). Unknown keys,
// duplicates and wrong types are reported with file and line, like every
// other config problem.
func (a Adapter) Decode(v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return fmt.Errorf("decode adapter %s: need a pointer, got %T", a.ID, v)
	}
	if a.rest == nil || len(a.rest.Content) == 0 {
		return nil
	}
	ck := newChecker(a.file)
	ck.check(a.rest, t.Elem(), a.path)
	if len(ck.problems) > 0 {
		ck.problems.sortByLine()
		return ck.problems
	}
	if err := a.rest.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", a.path, err)
	}
	return nil
}

// Path is where the entry is in the file, e.g. "adapters[0]", for messages.
func (a Adapter) Path() string { return a.path }

var adapterID = idPattern{max: 64, more: "_.-"}

const adapterIDRule = `use 1-64 characters from a-z, 0-9, "_", "-" and ".", starting with a letter or digit, such as "tg-main"`

// SetDefaults fills in the entry's absent access settings; the channel's
// own keys are its factory's to default.
func (a *Adapter) SetDefaults(section.Set) {
	a.ID = strings.TrimSpace(a.ID)
	a.Type = strings.ToLower(strings.TrimSpace(a.Type))
	a.DMPolicy = section.Normalize(a.DMPolicy, DefaultDMPolicy)
	a.Workspace = strings.TrimSpace(a.Workspace)
	a.AckReaction = strings.TrimSpace(a.AckReaction)
	a.GroupPolicy = section.Normalize(a.GroupPolicy, DefaultGroupPolicy)
	for j := range a.Allow {
		a.Allow[j] = strings.TrimSpace(a.Allow[j])
	}
	a.Groups.Policy = section.Normalize(a.Groups.Policy, DefaultGroupsPolicy)
	for j := range a.Groups.Allow {
		a.Groups.Allow[j] = strings.TrimSpace(a.Groups.Allow[j])
	}
}

// reservedAdapterIDs are the channels parley has of its own.
var reservedAdapterIDs = []string{"cli", "cron", "webhook", "api", "mcp"}

// Check reports the entry's problems but its id's uniqueness, which is
// the root's to check; the channel's own keys are its factory's.
func (a Adapter) Check(r section.Reporter) {
	switch {
	case a.ID == "":
		r.Add("id", "required; "+adapterIDRule)
	case !adapterID.MatchString(a.ID):
		r.Add("id", fmt.Sprintf("%q is not a valid adapter id; %s", a.ID, adapterIDRule))
	case slices.Contains(reservedAdapterIDs, a.ID):
		r.Add("id", fmt.Sprintf("%q is parley's own; choose another id, such as \"%s-main\"", a.ID, a.Type))
	}
	if a.Workspace != "" && !sessions.ValidWorkspaceID(a.Workspace) {
		r.Add("workspace", fmt.Sprintf("%q is not a workspace id; %s", a.Workspace, sessions.WorkspaceIDRule))
	}
	if ack := a.AckReaction; ack != "" && (len(ack) > maxAckReaction || strings.ContainsFunc(ack, unicode.IsSpace)) {
		r.Add("ack_reaction", fmt.Sprintf(`%q is not a reaction; give one emoji, such as "👀" (Discord also takes a server's emoji as name:id), or leave it out for none`, a.AckReaction))
	}
	if a.Type == "" {
		r.Add("type", `required; the kind of channel, such as "telegram", "discord" or "whatsapp"`)
	}
	switch a.DMPolicy {
	case "open", "allowlist", "pairing":
	default:
		r.Add("dm_policy", fmt.Sprintf(`%q is not allowed; use "open" (anyone), "allowlist" (only the users in allow) or "pairing" (allow, plus users an operator approves)`, a.DMPolicy))
	}
	switch a.GroupPolicy {
	case "mention", "always", "never":
	default:
		r.Add("group_policy", fmt.Sprintf(`%q is not allowed; use "mention" (answer when addressed), "always" or "never"`, a.GroupPolicy))
	}
	for j, u := range a.Allow {
		if u == "" {
			r.Add(fmt.Sprintf("allow[%d]", j), "empty; list platform user ids, such as \"123456789\"")
		}
	}
	switch a.Groups.Policy {
	case "pairing", "allowlist", "open":
	default:
		r.Add("groups.policy", fmt.Sprintf(`%q is not allowed; use "pairing" (groups.allow, plus groups an approved person pairs with /pair), "allowlist" (only groups.allow) or "open" (any group)`, a.Groups.Policy))
	}
	for j, g := range a.Groups.Allow {
		if g == "" {
			r.Add(fmt.Sprintf("groups.allow[%d]", j), "empty; list the groups' platform chat ids, such as \"-1001234567890\"")
		}
	}
}

// placeAdapters tells each entry where it is, for the messages of its
// factory's own checks.
func (c *Config) placeAdapters(file string) {
	for i := range c.Adapters {
		c.Adapters[i].file, c.Adapters[i].path = file, fmt.Sprintf("adapters[%d]", i)
	}
}

// checkAdapterIDs reports two entries of one id.
func (c *Config) checkAdapterIDs(ck *checker) {
	first := map[string]int{}
	for i, a := range c.Adapters {
		if a.ID == "" || !adapterID.MatchString(a.ID) || slices.Contains(reservedAdapterIDs, a.ID) {
			continue
		}
		if j, dup := first[a.ID]; dup {
			ck.add(fmt.Sprintf("adapters[%d].id", i), fmt.Sprintf("%q is used by adapters[%d] too; adapter ids must be unique", a.ID, j))
		}
		first[a.ID] = i
	}
}

// SameSettings says whether a and b have the same type-specific keys (a
// token, an endpoint), as a reload asks: those change only at a restart.
func (a Adapter) SameSettings(b Adapter) bool {
	enc := func(n *yaml.Node) string {
		if n == nil {
			return ""
		}
		out, err := yaml.Marshal(n)
		if err != nil {
			return "\x00" + err.Error()
		}
		return string(out)
	}
	return enc(a.rest) == enc(b.rest)
}
