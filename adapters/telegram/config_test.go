package telegram

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/secret"
)

const testToken = telegramtest.Token

func TestConfigDefaults(t *testing.T) {
	a, err := New("tg-main", yamlDecoder("token: "+testToken+"\n"), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	c := a.cfg
	if c.endpoint != DefaultAPIEndpoint || c.custom || c.mode != ModePolling || c.pollTimeout != 30 ||
		c.parseMode != ParseMarkdown || c.botUsername != "" || c.token.Reveal() != testToken {
		t.Fatalf("defaults: %+v", c)
	}
	if p, h := a.Webhook(); p != "" || h != nil {
		t.Fatalf("polling mode mounts %q", p)
	}
	if a.MaxMessageLength() != 4096 {
		t.Fatalf("limit %d", a.MaxMessageLength())
	}
}

func TestConfigValues(t *testing.T) {
	tests := []struct {
		name, yaml string
		check      func(settings) bool
	}{
		{"base URL endpoint", "api_endpoint: http://localhost:8081/", func(s settings) bool {
			return s.endpoint == "http://localhost:8081/bot%s/%s" && s.custom
		}},
		{"format endpoint", "api_endpoint: http://127.0.0.1:9/x/bot%s/%s", func(s settings) bool {
			return s.endpoint == "http://127.0.0.1:9/x/bot%s/%s"
		}},
		{"webhook, path from URL", "mode: webhook\nwebhook: {url: https://bot.example.com/tg/hook, secret_token: abc-DEF_123-abc-DEF_123-abc-DEF_123}", func(s settings) bool {
			return s.mode == ModeWebhook && s.path == "/tg/hook" && s.webhookURL == "https://bot.example.com/tg/hook" && s.secretToken == "abc-DEF_123-abc-DEF_123-abc-DEF_123"
		}},
		{"webhook, default path", "mode: Webhook\nwebhook: {url: 'https://bot.example.com', secret_token: s3cret-s3cret-s3cret-s3cret-s3cret-s3}", func(s settings) bool {
			return s.path == "/telegram/tg-main"
		}},
		{"webhook, own path", "mode: webhook\nwebhook: {url: 'https://bot.example.com/a', secret_token: s3cret-s3cret-s3cret-s3cret-s3cret-s3, path: /b}", func(s settings) bool {
			return s.path == "/b"
		}},
		{"http webhook with a local server", "api_endpoint: http://localhost:8081\nmode: webhook\nwebhook: {url: 'http://parley:8080/tg', secret_token: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}", func(s settings) bool {
			return s.webhookURL == "http://parley:8080/tg"
		}},
		{"poll timeout", "poll_timeout: 5", func(s settings) bool { return s.pollTimeout == 5 }},
		{"parse modes", "parse_mode: HTML", func(s settings) bool { return s.parseMode == ParseHTML }},
		{"no parse mode", "parse_mode: none", func(s settings) bool { return s.parseMode == ParseNone }},
		{"bot username", "bot_username: '@My_Bot'", func(s settings) bool { return s.botUsername == "My_Bot" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New("tg-main", yamlDecoder("token: "+testToken+"\n"+tc.yaml+"\n"), adapters.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(a.cfg) {
				t.Fatalf("settings %+v", a.cfg)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // each must be in the error
	}{
		{"unknown key", "token: " + testToken + "\ntokn: x", []string{"tokn"}},
		{"bad token", "token: 'not a token'", []string{"token does not look like a bot token", "@BotFather"}},
		{"mode", "token: " + testToken + "\nmode: poll", []string{`mode "poll"`, "polling", "webhook"}},
		{"endpoint verbs", "token: " + testToken + "\napi_endpoint: 'https://x/bot%s'", []string{"api_endpoint", "two %s"}},
		{"endpoint %d", "token: " + testToken + "\napi_endpoint: 'https://x/bot%d/%s'", []string{"api_endpoint", "other than %s"}},
		{"endpoint scheme", "token: " + testToken + "\napi_endpoint: 'ftp://x'", []string{"api_endpoint", "not an http or https URL"}},
		{"poll timeout", "token: " + testToken + "\npoll_timeout: 0", []string{"poll_timeout 0", "1 to 60"}},
		{"poll timeout high", "token: " + testToken + "\npoll_timeout: 600", []string{"poll_timeout 600"}},
		{"parse mode", "token: " + testToken + "\nparse_mode: rtf", []string{`parse_mode "rtf"`, "markdown", "html", "none"}},
		{"username", "token: " + testToken + "\nbot_username: 'a b'", []string{"bot_username", "@username"}},
		{"webhook without url", "token: " + testToken + "\nmode: webhook\nwebhook: {secret_token: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}", []string{"webhook.url is required"}},
		{"webhook http", "token: " + testToken + "\nmode: webhook\nwebhook: {url: 'http://x.example', secret_token: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}", []string{"must use https"}},
		{"webhook relative", "token: " + testToken + "\nmode: webhook\nwebhook: {url: '/hook', secret_token: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}", []string{"not an absolute URL"}},
		{"webhook no secret", "token: " + testToken + "\nmode: webhook\nwebhook: {url: 'https://x.example'}", []string{"webhook.secret_token is required"}},
		{"webhook short secret", "token: " + testToken + "\nmode: webhook\nwebhook: {url: 'https://x.example', secret_token: x}", []string{"webhook.secret_token is 1 characters, too short to resist guessing; use at least 32"}},
		{"webhook bad secret", "token: " + testToken + "\nmode: webhook\nwebhook: {url: 'https://x.example', secret_token: 'a b!'}", []string{"webhook.secret_token has characters"}},
		{"webhook bad path", "token: " + testToken + "\nmode: webhook\nwebhook: {url: 'https://x.example', secret_token: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, path: hook}", []string{`webhook.path "hook"`}},
		{"several at once", "token: " + testToken + "\nmode: x\nparse_mode: y", []string{"mode", "parse_mode"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New("tg-main", yamlDecoder(tc.yaml), adapters.Deps{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "AAHfake") {
				t.Errorf("error shows the token: %v", err)
			}
		})
	}
}

func TestConfigNoToken(t *testing.T) {
	for _, y := range []string{"token: ''", "token: '  '\nmode: polling", "{}"} {
		_, err := New("tg-main", yamlDecoder(y), adapters.Deps{})
		if !errors.Is(err, adapters.ErrNoCredentials) {
			t.Errorf("%q: %v, want ErrNoCredentials", y, err)
		}
	}
}

func TestRegistered(t *testing.T) {
	a, err := adapters.New("telegram", "tg-x", yamlDecoder("token: "+testToken), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.(*Adapter); !ok {
		t.Fatalf("built %T", a)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	c := Config{Token: testToken, Webhook: WebhookConfig{SecretToken: "hooksecret"}}
	var out []string
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		out = append(out, fmt.Sprintf(f, c), fmt.Sprintf(f, c.Token))
	}
	j, _ := json.Marshal(c)
	y, _ := yaml.Marshal(c)
	var logs syncBuffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("cfg", "token", c.Token, "cfg", c)
	a, err := New("tg-main", yamlDecoder("token: "+testToken), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(j), string(y), logs.String(), a.String(), fmt.Sprint(a))
	for _, s := range out {
		if strings.Contains(s, "AAHfake") || strings.Contains(s, "hooksecret") {
			t.Errorf("secret printed: %s", s)
		}
	}
	if !strings.Contains(string(j), "[redacted]") || c.Token.String() != "[redacted]" || secret.String("").String() != "" {
		t.Errorf("redacted forms: %s %q", j, c.Token.String())
	}
}
