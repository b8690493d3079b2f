package telegram

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/internal/lazyregexp"
	"github.com/parleyd/parley/secret"
)

// Config is an adapter's own section of the config file.
//
//	adapters:
//	  - id: tg-main
//	    type: telegram
//	    token: ${TELEGRAM_BOT_TOKEN}
type Config struct {
	// Token is the bot token from @BotFather.
	Token secret.String `yaml:"token"`
	// APIEndpoint is the Bot API address: a format with two %s, the token
	// and the method, or a base URL such as http://localhost:8081 for a
	// local Bot API server, to which "/bot%s/%s" is added.
	APIEndpoint string `yaml:"api_endpoint"`
	// Mode is how updates arrive: polling (the default) or webhook.
	Mode string `yaml:"mode"`
	// Webhook configures webhook mode.
	Webhook WebhookConfig `yaml:"webhook"`
	// PollTimeout is how long one getUpdates call waits for updates, in
	// seconds (1 to 60; nil means the default).
	PollTimeout *int `yaml:"poll_timeout"`
	// ParseMode is how replies are formatted: markdown (the default: the
	// Markdown models write, sent as Telegram HTML), html, markdownv2
	// (both sent as written) or none.
	ParseMode string `yaml:"parse_mode"`
	// BotUsername is the bot's @username, for mentions; getMe tells it
	// when empty.
	BotUsername string `yaml:"bot_username"`
}

// WebhookConfig configures webhook mode.
type WebhookConfig struct {
	// URL is the public https address Telegram posts updates to.
	URL string `yaml:"url"`
	// SecretToken is sent by Telegram in X-Telegram-Bot-Api-Secret-Token
	// with every update: 1 to 256 of A-Z, a-z, 0-9, _ and -.
	SecretToken secret.String `yaml:"secret_token"`
	// Path is where the handler is mounted on parley's HTTP server; it
	// defaults to the URL's path, or /telegram/<adapter id>.
	Path string `yaml:"path"`
}

// Modes and parse modes.
const (
	ModePolling = "polling"
	ModeWebhook = "webhook"

	ParseMarkdown   = "markdown"
	ParseMarkdownV2 = "markdownv2"
	ParseHTML       = "html"
	ParseNone       = "none"
)

// Defaults.
const (
	// DefaultAPIEndpoint is Telegram's own Bot API, in the library's format.
	DefaultAPIEndpoint = "https://api.telegram.org/bot%s/%s"
	// DefaultPollTimeout is the long-poll wait in seconds.
	DefaultPollTimeout = 30
	maxPollTimeout     = 60
)

var (
	tokenPattern  = lazyregexp.New(`^[0-9]+:[A-Za-z0-9_-]+$`)
	secretPattern = lazyregexp.New(`^[A-Za-z0-9_-]{1,256}$`)
	namePattern   = lazyregexp.New(`^[A-Za-z][A-Za-z0-9_]{2,31}$`)
)

// settings is a validated Config with its defaults filled in.
type settings struct {
	token       secret.String
	endpoint    string // format with %s for token and method
	custom      bool   // endpoint is not Telegram's own
	mode        string
	webhookURL  string
	secretToken secret.String
	path        string // e.g. /telegram/tg-main
	pollTimeout int
	parseMode   string
	botUsername string
}

// parseConfig decodes and validates one adapter's section.
func parseConfig(id adapters.ID, decode adapters.Decoder, log *slog.Logger) (settings, error) {
	var c Config
	if decode != nil {
		if err := decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return settings{}, fmt.Errorf("telegram settings: %w", err)
		}
	}
	s := settings{token: secret.String(strings.TrimSpace(c.Token.Reveal()))}
	if s.token == "" {
		return settings{}, fmt.Errorf("%w: token is empty; set token to the bot token from @BotFather, e.g. token: ${TELEGRAM_BOT_TOKEN}", adapters.ErrNoCredentials)
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if !tokenPattern.MatchString(s.token.Reveal()) {
		bad("token does not look like a bot token (digits, a colon, then letters, digits, _ or -); copy it from @BotFather")
	}

	var err error
	s.endpoint, s.custom, err = parseEndpoint(c.APIEndpoint)
	if err != nil {
		bad("api_endpoint %v", err)
	}

	s.mode = strings.ToLower(strings.TrimSpace(c.Mode))
	switch s.mode {
	case "":
		s.mode = ModePolling
	case ModePolling, ModeWebhook:
	default:
		bad("mode %q is not a mode; use polling (the default) or webhook", c.Mode)
	}

	s.pollTimeout = DefaultPollTimeout
	if c.PollTimeout != nil {
		s.pollTimeout = *c.PollTimeout
		if s.pollTimeout < 1 || s.pollTimeout > maxPollTimeout {
			bad("poll_timeout %d is out of range; use whole seconds from 1 to %d (default %d)", s.pollTimeout, maxPollTimeout, DefaultPollTimeout)
		}
	}

	s.parseMode = strings.ToLower(strings.TrimSpace(c.ParseMode))
	switch s.parseMode {
	case "":
		s.parseMode = ParseMarkdown
	case ParseMarkdown, ParseMarkdownV2, ParseHTML, ParseNone:
	default:
		bad("parse_mode %q is not a parse mode; use markdown (the default), html, markdownv2 or none", c.ParseMode)
	}

	s.botUsername = strings.TrimPrefix(strings.TrimSpace(c.BotUsername), "@")
	if s.botUsername != "" && !namePattern.MatchString(s.botUsername) {
		bad("bot_username %q is not a Telegram username; use the bot's @username as @BotFather shows it, or leave it out to ask getMe", c.BotUsername)
	}

	w := c.Webhook
	w.URL = strings.TrimSpace(w.URL)
	w.Path = strings.TrimSpace(w.Path)
	s.secretToken = secret.String(strings.TrimSpace(w.SecretToken.Reveal()))
	if s.mode == ModeWebhook {
		s.webhookURL, s.path = w.URL, w.Path
		checkWebhook(&s, id, bad)
	} else if w.URL != "" || w.Path != "" || s.secretToken != "" {
		log.Info("telegram webhook settings ignored in polling mode", "adapter", id)
	}

	if len(problems) > 0 {
		return settings{}, errors.New(strings.Join(problems, "; "))
	}
	return s, nil
}

// checkWebhook validates the webhook settings and fills in the path.
func checkWebhook(s *settings, id adapters.ID, bad func(string, ...any)) {
	if s.webhookURL == "" {
		bad("webhook.url is required in webhook mode; set it to the public https address that reaches parley's HTTP server, e.g. https://bot.example.com/telegram/%s", id)
	} else {
		u, err := url.Parse(s.webhookURL)
		switch {
		case err != nil || u.Host == "":
			bad("webhook.url %q is not an absolute URL; use e.g. https://bot.example.com/telegram/%s", s.webhookURL, id)
		case u.Scheme != "https" && !(u.Scheme == "http" && s.custom):
			bad("webhook.url %q must use https (Telegram posts only to https; http works only with a local Bot API server set in api_endpoint)", s.webhookURL)
		case s.path == "" && u.Path != "" && u.Path != "/":
			s.path = u.Path
		}
	}
	if s.path == "" {
		s.path = "/telegram/" + string(id)
	}
	if !strings.HasPrefix(s.path, "/") || strings.ContainsAny(s.path, " \t{}?#") {
		bad("webhook.path %q is not a URL path; use a path starting with /, e.g. /telegram/%s", s.path, id)
	}
	switch n := len(s.secretToken.Reveal()); {
	case n == 0:
		bad("webhook.secret_token is required in webhook mode, so only Telegram can post updates; set %d to 256 characters of A-Z, a-z, 0-9, _ and -, e.g. from `openssl rand -hex 32`", minSecretToken)
	case !secretPattern.MatchString(s.secretToken.Reveal()):
		bad("webhook.secret_token has characters Telegram refuses or is longer than 256; use only A-Z, a-z, 0-9, _ and -")
	case n < minSecretToken:
		bad("webhook.secret_token is %d characters, too short to resist guessing; use at least %d random ones, e.g. from `openssl rand -hex 32`", n, minSecretToken)
	}
}

// minSecretToken is the fewest characters webhook.secret_token may have,
// the rule parley's other secrets keep.
const minSecretToken = 32

// parseEndpoint accepts the library's format ("https://host/bot%s/%s") or
// a base URL, to which "/bot%s/%s" is added.
func parseEndpoint(raw string) (format string, custom bool, err error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || raw == DefaultAPIEndpoint {
		return DefaultAPIEndpoint, false, nil
	}
	format = raw
	switch strings.Count(raw, "%") {
	case 0:
		format = strings.TrimRight(raw, "/") + "/bot%s/%s"
	case 2:
		if strings.Count(raw, "%s") != 2 {
			return "", true, fmt.Errorf("%q has a %% verb other than %%s; use a format with two %%s, the token then the method, e.g. %s", raw, DefaultAPIEndpoint)
		}
	default:
		return "", true, fmt.Errorf("%q must have two %%s (the token, then the method), e.g. %s, or be a base URL such as http://localhost:8081", raw, DefaultAPIEndpoint)
	}
	u, perr := url.Parse(fmt.Sprintf(format, "TOKEN", "getMe"))
	if perr != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", true, fmt.Errorf("%q is not an http or https URL; use e.g. %s or http://localhost:8081", raw, DefaultAPIEndpoint)
	}
	return format, true, nil
}
