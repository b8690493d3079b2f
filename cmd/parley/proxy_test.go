package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Behind a reverse proxy named in http.trusted_proxies, the dashboard's
// guess throttle counts each client by the address the proxy forwards:
// one guesser is refused, and a person behind the same proxy with the
// right token still gets in (before, every request shared the proxy's
// address and the guesser locked everyone out).
func TestTrustedProxyNamesTheClient(t *testing.T) {
	addr := freeAddr(t)
	path, dbPath := writeConfig(t, "http:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n  trusted_proxies: [\"127.0.0.1\"]\n")
	runDaemon(t, context.Background(), path, dbPath)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(token, from string) int {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+addr+"/admin/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", from)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const guesser, person = "198.51.100.7", "203.0.113.9"
	for i := 0; ; i++ {
		code := login("wrong-token", guesser)
		if code == http.StatusTooManyRequests {
			break
		}
		if code != http.StatusUnauthorized || i > 50 {
			t.Fatalf("guess %d: %d, want 401 until the guesser is refused", i+1, code)
		}
	}
	if code := login(apiToken, guesser); code != http.StatusTooManyRequests {
		t.Fatalf("the guesser's address with the right token: %d, want 429", code)
	}
	if code := login(apiToken, person); code != http.StatusSeeOther {
		t.Fatalf("a person behind the same proxy with the right token: %d, want 303 into the dashboard", code)
	}
}
