package discord

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/parleyd/parley/adapters"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		yaml    string
		want    func(settings) string // "" when right
		wantErr string
		noCreds bool
	}{
		{name: "nothing", yaml: "", noCreds: true},
		{name: "empty token", yaml: "token: \"\"\n", noCreds: true},
		{name: "only Bot", yaml: "token: \"Bot \"\n", noCreds: true},
		{name: "token only: Discord, one shard", yaml: "token: abc.def.ghi\n", want: func(s settings) string {
			if s.Token.Reveal() != "abc.def.ghi" || s.api != nil || s.gateway != "" || s.shardID != 0 || s.shardCount != 1 {
				return fmt.Sprintf("%+v", s)
			}
			return ""
		}},
		{name: "Bot prefix dropped", yaml: "token: Bot abc.def.ghi\n", want: func(s settings) string {
			if s.Token.Reveal() != "abc.def.ghi" {
				return "token kept its prefix"
			}
			return ""
		}},
		{name: "overrides and shards", yaml: "token: t\napi_url: http://127.0.0.1:9/proxy/\ngateway_url: ws://127.0.0.1:9/gw\nshard_id: 2\nshard_count: 3\n", want: func(s settings) string {
			if s.api == nil || s.api.String() != "http://127.0.0.1:9/proxy" || s.gateway != "ws://127.0.0.1:9/gw" || s.shardID != 2 || s.shardCount != 3 {
				return fmt.Sprintf("%+v api=%v", s, s.api)
			}
			return ""
		}},
		{name: "unknown key", yaml: "token: t\nintents: 513\n", wantErr: "intents"},
		{name: "token with a space", yaml: "token: \"abc def\"\n", wantErr: "token has spaces"},
		{name: "api_url not http", yaml: "token: t\napi_url: ftp://x\n", wantErr: "api_url"},
		{name: "api_url with the API path", yaml: "token: t\napi_url: http://x/api/v9\n", wantErr: "use http://x"},
		{name: "api_url with a query", yaml: "token: t\napi_url: http://x/?a=b\n", wantErr: "api_url has a query"},
		{name: "gateway_url not ws", yaml: "token: t\ngateway_url: http://x/gateway\n", wantErr: "gateway_url"},
		{name: "gateway_url with a query", yaml: "token: t\ngateway_url: wss://x/?v=9\n", wantErr: "version and encoding are added"},
		{name: "shard_id past the count", yaml: "token: t\nshard_id: 2\nshard_count: 2\n", wantErr: "shard_id 2 is out of range"},
		{name: "shard_id without a count", yaml: "token: t\nshard_id: 1\n", wantErr: "shard_id 1 is out of range"},
		{name: "negative shard_count", yaml: "token: t\nshard_count: -1\n", wantErr: "shard_count -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseConfig(yamlDecoder(tc.yaml))
			switch {
			case tc.noCreds:
				if !errors.Is(err, adapters.ErrNoCredentials) {
					t.Errorf("err = %v, want ErrNoCredentials", err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want one with %q", err, tc.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if msg := tc.want(s); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

func TestRegistered(t *testing.T) {
	t.Parallel()
	if !slices.Contains(adapters.Types(), "discord") {
		t.Fatalf("types = %v, want discord registered", adapters.Types())
	}
	_, err := adapters.New("discord", "dc", yamlDecoder(""), adapters.Deps{})
	if !errors.Is(err, adapters.ErrNoCredentials) {
		t.Errorf("no token: %v, want ErrNoCredentials", err)
	}
	a, err := adapters.New("discord", "dc", yamlDecoder("token: abc.def\n"), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.(*Adapter); !ok {
		t.Errorf("built %T", a)
	}
}

func TestSessionSettings(t *testing.T) {
	t.Parallel()
	ad, err := New("dc", yamlDecoder("token: abc.def\nshard_id: 1\nshard_count: 4\n"), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	s := ad.(*Adapter).s
	if s.Identify.Intents != discordgo.IntentsGuilds|discordgo.IntentsGuildMessages|discordgo.IntentsDirectMessages|discordgo.IntentsMessageContent {
		t.Errorf("intents = %d", s.Identify.Intents)
	}
	if s.ShouldRetryOnRateLimit || s.ShouldReconnectOnError || !s.SyncEvents {
		t.Errorf("retry on rate limit %v, reconnect %v, sync events %v; want false, false, true",
			s.ShouldRetryOnRateLimit, s.ShouldReconnectOnError, s.SyncEvents)
	}
	if s.Identify.Shard == nil || *s.Identify.Shard != [2]int{1, 4} {
		t.Errorf("shard = %v", s.Identify.Shard)
	}
}
