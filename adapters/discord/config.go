package discord

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/internal/lazyregexp"
	"github.com/parleyd/parley/secret"
)

// Config is a Discord adapter's own section of the config file.
//
//	adapters:
//	  - id: discord-main
//	    type: discord
//	    token: ${DISCORD_BOT_TOKEN}
type Config struct {
	// Token is the bot token from the Discord developer portal (Bot →
	// Reset Token); a leading "Bot " is accepted and dropped.
	Token secret.String `yaml:"token"`
	// APIURL replaces https://discord.com for REST calls, keeping the
	// /api/v9/... path: a REST proxy, or a fake in tests, e.g.
	// http://127.0.0.1:8080. Empty means Discord itself.
	APIURL string `yaml:"api_url"`
	// GatewayURL is the websocket gateway to connect to, e.g.
	// ws://127.0.0.1:8080/gateway. Empty means the one GET /gateway names
	// (at api_url when that is set).
	GatewayURL string `yaml:"gateway_url"`
	// ShardID and ShardCount split the bot's guilds across processes:
	// this process is shard shard_id of shard_count (0 ≤ shard_id <
	// shard_count). Direct messages always go to shard 0. The default is
	// one shard.
	ShardID    int `yaml:"shard_id"`
	ShardCount int `yaml:"shard_count"`
}

// settings is a validated Config.
// Its token is an exported field so fmt reaches Secret's redacting
// methods (it can't call them through unexported fields).
type settings struct {
	Token      secret.String // without "Bot "
	api        *url.URL      // nil: Discord's own
	gateway    string        // "": ask GET /gateway
	shardID    int
	shardCount int
}

// maxShards is a sanity bound; Discord's largest bots run a few thousand.
const maxShards = 1 << 16

var apiVersionPath = lazyregexp.New(`/api(/v[0-9]+)?/?$`)

// parseConfig decodes and validates one adapter's section.
func parseConfig(decode adapters.Decoder) (settings, error) {
	var c Config
	if decode != nil {
		if err := decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return settings{}, fmt.Errorf("discord settings: %w", err)
		}
	}
	tok := strings.TrimSpace(c.Token.Reveal())
	if tok == "Bot" {
		tok = ""
	}
	tok = strings.TrimSpace(strings.TrimPrefix(tok, "Bot "))
	if tok == "" {
		return settings{}, fmt.Errorf("%w: token is empty; set token to the bot token from the Discord developer portal (your application → Bot → Reset Token), e.g. token: ${DISCORD_BOT_TOKEN}", adapters.ErrNoCredentials)
	}
	s := settings{Token: secret.String(tok), shardID: c.ShardID, shardCount: c.ShardCount}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if strings.ContainsFunc(tok, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII }) {
		bad("token has spaces or characters a bot token never has; copy it again from the developer portal")
	}

	if raw := strings.TrimSpace(c.APIURL); raw != "" {
		u, err := url.Parse(raw)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			bad("api_url %q is not an http or https URL; use e.g. http://127.0.0.1:8080, or leave it out for Discord itself", raw)
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			bad("api_url has a query, fragment or user info; use only scheme, host and an optional path prefix, e.g. http://127.0.0.1:8080")
		case apiVersionPath.MatchString(u.Path):
			bad("api_url %q ends in the API path; it replaces https://discord.com, and /api/v9/... is added, so use %s", raw, strings.TrimSuffix(raw, apiVersionPath.FindString(u.Path)))
		default:
			u.Path = strings.TrimRight(u.Path, "/")
			s.api = u
		}
	}

	if raw := strings.TrimSpace(c.GatewayURL); raw != "" {
		u, err := url.Parse(raw)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "ws" && u.Scheme != "wss"):
			bad("gateway_url %q is not a ws or wss URL; use e.g. ws://127.0.0.1:8080/gateway, or leave it out to ask the API", raw)
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			bad("gateway_url has a query, fragment or user info; the version and encoding are added, so use only scheme, host and path, e.g. ws://127.0.0.1:8080/gateway")
		default:
			s.gateway = raw
		}
	}

	if s.shardCount == 0 {
		s.shardCount = 1
	}
	switch {
	case s.shardCount < 1 || s.shardCount > maxShards:
		bad("shard_count %d is out of range; use 1 (the default) up to %d", c.ShardCount, maxShards)
	case s.shardID < 0 || s.shardID >= s.shardCount:
		bad("shard_id %d is out of range; with shard_count %d use 0 to %d", c.ShardID, s.shardCount, s.shardCount-1)
	}

	if len(problems) > 0 {
		return settings{}, errors.New(strings.Join(problems, "; "))
	}
	return s, nil
}
