package sessions

import (
	"fmt"
	"strings"
	"time"
)

// Surfaces that parley itself starts. Any other surface (telegram, discord,
// whatsapp, webchat, ...) is a channel.
const (
	SurfaceCLI      = "cli"
	SurfaceAPI      = "api"
	SurfaceCron     = "cron"
	SurfaceWebhook  = "webhook"
	SurfaceSubagent = "subagent"
	// SurfaceMCP is the Model Context Protocol server's: an MCP client
	// talking to an agent (parley mcp serve, /mcp).
	SurfaceMCP = "mcp"
)

// Key is the composite identity of a session. A group surface leaves
// UserID empty, so every member shares one session; WorkspaceID is optional.
type Key struct {
	UserID      string `json:"user_id,omitempty"`
	Surface     string `json:"surface"`
	SurfaceID   string `json:"surface_id"`
	AgentID     string `json:"agent_id"`
	WorkspaceID string `json:"workspace_id,omitempty"`
}

// String is the readable key used in logs and the CLI: "telegram:12345",
// "cron:nightly:1700000000000", "cli:chat". A subagent's surface id is
// already its full readable key, "<parent>:subagent:<ts>-<rand>".
func (k Key) String() string {
	if k.Surface == SurfaceSubagent {
		return k.SurfaceID
	}
	return k.Surface + ":" + k.SurfaceID
}

// Group reports whether the key names a shared group session.
func (k Key) Group() bool { return k.UserID == "" }

// Validate says what is missing from a key.
func (k Key) Validate() error {
	var missing []string
	if k.Surface == "" {
		missing = append(missing, "surface")
	}
	if k.SurfaceID == "" {
		missing = append(missing, "surface_id")
	}
	if k.AgentID == "" {
		missing = append(missing, "agent_id")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s missing", ErrInvalidKey, strings.Join(missing, ", "))
	}
	if strings.Contains(k.Surface, ":") {
		return fmt.Errorf("%w: surface %q must not contain ':'", ErrInvalidKey, k.Surface)
	}
	return nil
}

// Kind sorts a surface into the groups that share defaults (history limits,
// prompt mode): "cli", "api", "mcp", "cron", "webhook", "subagent" or
// "channel".
func (k Key) Kind() string {
	switch k.Surface {
	case SurfaceCLI, SurfaceAPI, SurfaceMCP, SurfaceCron, SurfaceWebhook, SurfaceSubagent:
		return k.Surface
	}
	return "channel"
}

// DefaultHistoryTurns is how many user turns of history a session of kind
// (a Key.Kind) puts in the prompt when its agent sets no limit: few for
// unattended runs (cron, webhook), many where a person works at length
// (cli, api, mcp), and the channels' for every other kind (subagents
// until they can inherit their root's limit).
func DefaultHistoryTurns(kind string) int {
	switch kind {
	case SurfaceCron, SurfaceWebhook:
		return 10
	case SurfaceCLI, SurfaceAPI, SurfaceMCP:
		return 50
	default:
		return 30
	}
}

// WorkspaceIDRule says what a workspace id may be (bindings, adapters,
// the API).
const WorkspaceIDRule = `use 1-64 characters from a-z, 0-9, "_", "." and "-", starting with a letter or digit`

// ValidWorkspaceID reports whether s is a workspace id.
func ValidWorkspaceID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// CLIRunPrefix starts the surface id of a one-question CLI session
// (`parley ask`): "cli:run:<time>".
const CLIRunPrefix = "run:"

// SingleRun reports whether the session holds one run and is archived when
// it ends: a cron fire's, a webhook delivery's, a `parley ask`'s.
func (k Key) SingleRun() bool {
	switch k.Surface {
	case SurfaceCron, SurfaceWebhook:
		return true
	case SurfaceCLI:
		return strings.HasPrefix(k.SurfaceID, CLIRunPrefix)
	}
	return false
}

// ChatKey is the key of a direct conversation with one user on a channel.
func ChatKey(surface, chatID, userID, agentID string) Key {
	return Key{UserID: userID, Surface: surface, SurfaceID: chatID, AgentID: agentID}
}

// GroupKey is the key of a group chat, shared by all its members.
func GroupKey(surface, chatID, agentID string) Key {
	return Key{Surface: surface, SurfaceID: chatID, AgentID: agentID}
}

// CLIKey is the key of the interactive `parley chat` session.
func CLIKey(userID, agentID string) Key {
	return Key{UserID: userID, Surface: SurfaceCLI, SurfaceID: "chat", AgentID: agentID}
}

// MCPKey is the key of an MCP client's conversation, "mcp:<name>" ("mcp:default"
// unless the client names another). Its user is the MCP client itself.
func MCPKey(name, agentID string) Key {
	return Key{UserID: SurfaceMCP, Surface: SurfaceMCP, SurfaceID: name, AgentID: agentID}
}

// CronKey is the key of one cron fire: "cron:<jobId>:<ts>".
func CronKey(jobID string, at time.Time, agentID string) Key {
	return Key{Surface: SurfaceCron, SurfaceID: fmt.Sprintf("%s:%d", jobID, at.UnixMilli()), AgentID: agentID}
}

// WebhookKey is the key of one webhook delivery: "webhook:<hookId>:<ts>".
func WebhookKey(hookID string, at time.Time, agentID string) Key {
	return Key{Surface: SurfaceWebhook, SurfaceID: fmt.Sprintf("%s:%d", hookID, at.UnixMilli()), AgentID: agentID}
}

// SubagentKey is the key of a child session:
// "<parent>:subagent:<ts>-<rand>", where the surface is "subagent".
func SubagentKey(parent Key, at time.Time, suffix, agentID string) Key {
	return Key{
		UserID:      parent.UserID,
		Surface:     SurfaceSubagent,
		SurfaceID:   fmt.Sprintf("%s:subagent:%d-%s", parent, at.UnixMilli(), suffix),
		AgentID:     agentID,
		WorkspaceID: parent.WorkspaceID,
	}
}
