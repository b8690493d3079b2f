package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
)

// fakeProvider answers every OpenAI request with status and body.
func fakeProvider(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// closedAddress is a loopback address nothing listens on.
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// The attacker's side of a failed turn: a member of a Telegram group, who
// can make a turn fail, reads neither the provider's host and port, nor
// its error body, nor the config's key names, in the reply or in /status.
// A missing or refused key says the assistant isn't configured.
func TestGroupMemberLearnsNothingFromAFailedTurn(t *testing.T) {
	internalBody := `{"error":{"message":"upstream http://llm-gw.internal.corp:8443/v1 refused the request","type":"invalid_request_error"}}`
	refused := `{"error":{"message":"Incorrect API key provided: sk-tes****-key","type":"invalid_request_error","code":"invalid_api_key"}}`
	cases := []struct {
		name          string
		provider      string // providers.openai's config
		notConfigured bool
	}{
		{"provider error body", "    api_key: sk-test-secret-key\n    base_url: " + fakeProvider(t, 400, internalBody).URL + "/v1\n", false},
		{"provider unreachable", "    api_key: sk-test-secret-key\n    base_url: http://" + closedAddress(t) + "/v1\n", false},
		{"key refused", "    api_key: sk-test-secret-key\n    base_url: " + fakeProvider(t, 401, refused).URL + "/v1\n", true},
		{"no key", "    api_key: \"\"\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := telegramtest.NewServer()
			defer tg.Close()
			_, stop := runWithTelegram(t, tg, "    group_policy: always\n    groups: {policy: open}\nagents:\n  - id: default\n    model: openai/gpt-4o-mini\n"+
				"providers:\n  openai:\n"+tc.provider)
			defer stop()
			tg.InjectText(-100, 7, "what's up?")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sent, err := tg.WaitSent(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			reply := sent[0].Text
			m := regexp.MustCompile(`\(ref ([0-9a-f]{8})\)`).FindStringSubmatch(reply)
			if m == nil {
				t.Fatalf("reply without a reference id: %q", reply)
			}
			tg.InjectText(-100, 7, "/status")
			sent, err = tg.WaitSent(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			status := sent[1].Text
			if !strings.Contains(status, "Last error: ref "+m[1]) {
				t.Errorf("/status doesn't name the failure %s: %q", m[1], status)
			}
			for _, text := range []string{reply, status} {
				for _, leak := range []string{"127.0.0.1", "internal.corp", "8443", "dial tcp", "sk-", "Incorrect API key",
					"providers.", "api_key", "base_url", "Post ", "http"} {
					if strings.Contains(text, leak) {
						t.Errorf("a group member reads %q in %q", leak, text)
					}
				}
			}
			if got := strings.Contains(reply, "The assistant isn't configured correctly"); got != tc.notConfigured {
				t.Errorf("reply %q: says the assistant isn't configured: %v, want %v", reply, got, tc.notConfigured)
			}
		})
	}
}
