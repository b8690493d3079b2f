// Package layers states the house's floors: which of parley's packages
// may import which. A package may import packages on its own floor or
// below, never above; TestLayers fails on an import that climbs, and on a
// package that has no floor yet (place it, in the same change that adds
// it). docs/architecture.md says what each floor is for.
package layers

// Module is parley's module path.
const Module = "github.com/parleyd/parley"

// Floors lists parley's packages by floor, lowest first. A package is
// placed by its path or by the nearest folder above it that is listed
// (so a channel's test fake sits with its channel).
var Floors = [][]string{
	// Foundations: no parley package but each other.
	{"internal", "secret", "signing", "textcut", "events", "commands", "dbutil", "migrations", "cluster", "telemetry", "config/section"},
	// Records and their rules: sessions, permissions, secrets, the model
	// interface and its providers, the config, the API client.
	{"sessions", "permissions", "vault", "llm", "config", "client", "speech", "runfile"},
	// What a turn uses: tools, the channel interface, session storage,
	// cron, MCP tools.
	{"tools", "clienttools", "kv", "files", "sessionsql", "sessionhooks", "harness", "skills", "media", "adapters", "cron", "mcptools", "sessions/storetest"},
	// The turn loop.
	{"agent"},
	// Services over the turn: memory and compaction, the gateway, the
	// channels, webhooks, metrics, the HTTP API, the MCP server, the ACP
	// agent, the dashboard.
	{"memory", "gateway", "adapters/telegram", "adapters/discord", "adapters/whatsapp", "adapters/webchat", "adapters/cli",
		"webhooks", "metrics", "api", "mcpserve", "acpserve", "admin", "budgets", "turns", "httpserve", "status"},
	// The daemon: builds the parts from a config and orders their lives.
	{"daemon"},
	// The command line, and the tools over a daemon it runs: doctor's
	// checks, the benchmarks.
	{"cmd", "doctor", "bench"},
}
