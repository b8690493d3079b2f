package memory

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyd/parley/sessions"
)

// Scope is whose memories a read or write may touch: one agent's memories of
// one user, or of one group, in one workspace. Every query is bound to one
// scope, and nothing reaches across scopes.
type Scope struct {
	Agent string `json:"agent"`
	// User is "user:<surface>:<user id>" for a person and
	// "group:<surface>:<chat id>" for a shared group session. ScopeOf builds it.
	User      string `json:"user"`
	Workspace string `json:"workspace,omitempty"`
}

// String is the readable scope for logs and errors.
func (s Scope) String() string {
	if s.Workspace == "" {
		return s.Agent + "/" + s.User
	}
	return s.Agent + "/" + s.User + "@" + s.Workspace
}

// ScopeOf derives the memory scope of a session:
//
//   - a person's session (the key has a user id) is scoped to
//     "user:<surface>:<user id>". Platform user ids are unique only within a
//     surface, so Telegram user 42 and Discord user 42 never share memories;
//   - a group session (no user id) is scoped to the group,
//     "group:<surface>:<chat id>", shared by all its members on purpose;
//   - cron and webhook sessions are one per fire or delivery, so they are
//     scoped to the job or hook, "group:cron:<job id>" and
//     "group:webhook:<hook id>": a job's runs share what they remember;
//   - a subagent shares its root session's scope.
//
// The agent and workspace come from the key unchanged. The "user:" and
// "group:" prefixes keep the two kinds disjoint whatever an id contains.
func ScopeOf(k sessions.Key) Scope {
	surface, chat := k.Surface, k.SurfaceID
	if surface == sessions.SurfaceSubagent {
		// A subagent's surface id is "<root key>:subagent:<ts>-<rand>", and
		// the root key is "<surface>:<surface id>".
		root := chat
		if i := strings.Index(root, ":"+sessions.SurfaceSubagent+":"); i >= 0 {
			root = root[:i]
		}
		surface, chat, _ = strings.Cut(root, ":")
	}
	s := Scope{Agent: k.AgentID, Workspace: k.WorkspaceID}
	switch {
	case k.UserID != "":
		s.User = "user:" + surface + ":" + k.UserID
	case surface == sessions.SurfaceCron || surface == sessions.SurfaceWebhook:
		s.User = "group:" + surface + ":" + trimFireTime(chat)
	default:
		s.User = "group:" + surface + ":" + chat
	}
	return s
}

// trimFireTime turns a cron or webhook surface id into the job or hook id:
// a cron run's is "<job id>:<unix ms>", a webhook delivery's
// "<hook id>:<unix ms>-<hex>" (the suffix keeps two deliveries in one
// millisecond apart), so each delivery's random part stays out of the
// scope and a hook's deliveries share one, as a job's runs do.
func trimFireTime(id string) string {
	i := strings.LastIndex(id, ":")
	if i < 0 {
		return id
	}
	ms, suffix, hasSuffix := strings.Cut(id[i+1:], "-")
	if !allIn(ms, "0123456789") || (hasSuffix && !allIn(suffix, "0123456789abcdef")) {
		return id
	}
	return id[:i]
}

// allIn reports whether s is not empty and has only bytes of set.
func allIn(s, set string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(set, s[i]) < 0 {
			return false
		}
	}
	return true
}

// Validate says what is wrong with a scope, or returns nil.
func (s Scope) Validate() error {
	if s.Agent == "" {
		return fmt.Errorf("%w: the agent is missing", ErrInvalidScope)
	}
	if s.User == "" {
		return fmt.Errorf("%w: the user is missing (derive scopes with memory.ScopeOf)", ErrInvalidScope)
	}
	for name, v := range map[string]string{"agent": s.Agent, "user": s.User, "workspace": s.Workspace} {
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: the %s is not valid UTF-8 text", ErrInvalidScope, name)
		}
	}
	return nil
}

// key is a digest of the scope spelled in the letters a to p only, so that
// full-text engines see it as one token and filters need no escaping. Valid
// scopes hold no NUL, so the separators make it unambiguous.
func (s Scope) key() string {
	sum := sha256.Sum256([]byte(s.Agent + "\x00" + s.User + "\x00" + s.Workspace))
	var b [32]byte
	for i, c := range sum[:16] {
		b[2*i], b[2*i+1] = 'a'+c>>4, 'a'+c&0x0f
	}
	return string(b[:])
}
